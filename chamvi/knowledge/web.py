"""``urls([...])``: web pages as knowledge, fetched with httpx the way a careful crawler does.

Each page is one document whose id is the URL as listed (a PDF: one document per page,
``<url>#page=<n>``). HTML is reduced to its main text by trafilatura (boilerplate such as menus and
footers left out); ``text/plain`` and ``text/markdown`` are taken as they are.

A pass sends conditional requests (``If-None-Match`` / ``If-Modified-Since`` from the ETag and
Last-Modified the page answered last time), so an unchanged page costs a 304 and embeds nothing. A
404 or 410 deletes the page's document; a timeout, a connection error, a 401/403/408/429 or a 5xx
marks the read incomplete, so nothing is deleted. Redirects are followed (5 at most), each hop
checked again; ``robots.txt`` is obeyed; bodies over ``max_bytes`` and unknown content types are
reported and skipped. Addresses that are not public (loopback, private, link-local, and those
forms again inside IPv6: ``::ffff:127.0.0.1``, ``64:ff9b::10.0.0.1``, ``2002:7f00:1::``) are refused
unless ``allow_private=True``, so an untrusted URL list cannot reach internal services. A name is
resolved once, every address it answers is checked, and the connection goes to a checked address: a
DNS answer that changes between the check and the connection (rebinding) reaches nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.robotparser
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import httpcore
import httpx

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge._pdf import (
    MAX_PDF_BYTES,
    PAGE_FRAGMENT,
    PDF_PAGES,
    PdfProblem,
    page_documents,
    read_pdf,
)
from chamvi.knowledge.documents import MAX_ID_CHARS, Document
from chamvi.knowledge.sources import SourceContext, StoredVersion, first_heading

USER_AGENT = "chamvi-knowledge/0.1"
MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 5 * 1_048_576
_HTML = ("text/html", "application/xhtml+xml")
_TEXT = ("text/plain", "text/markdown", "text/x-markdown")
_PDF = "application/pdf"
_INCOMPLETE_STATUSES = frozenset({401, 403, 408, 425, 429})
_GONE_STATUSES = frozenset({404, 410})
_DRAIN_BYTES = 65_536


class _Refused(Exception):
    """A URL this source will not fetch (a private address, a scheme, robots.txt)."""


class _Failed(Exception):
    """A fetch that may succeed later: the read is incomplete."""


@dataclass(frozen=True)
class UrlsSource:
    """The pages of ``urls`` (see :func:`urls`)."""

    urls: tuple[str, ...]
    crawl: bool = False
    max_pages: int = 100
    allow_private: bool = False
    trusted: bool | None = False
    timeout: float = 20.0
    max_bytes: int = DEFAULT_MAX_BYTES
    concurrency: int = 8
    robots: bool = True
    user_agent: str = USER_AGENT
    kind: str = "urls"
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False, compare=False)

    def check(self) -> None:
        """Refuses at boot a literal address that is not public, unless ``allow_private``.

        Raises:
            InvalidAgentDefinitionError: a URL names a loopback or private address.
        """
        if self.allow_private:
            return
        for url in self.urls:
            host = urlsplit(url).hostname or ""
            if _not_public(host):
                raise InvalidAgentDefinitionError(
                    f"urls(): {url!r} names a private or loopback address: pass allow_private=True "
                    "for an internal site"
                )

    async def documents(self, ctx: SourceContext) -> AsyncIterator[Document]:
        """Every page, fetched conditionally, ``concurrency`` at a time; problems go to ``ctx``."""
        self.check()
        crawler = _Crawler(self, ctx)
        limits = httpx.Limits(max_connections=self.concurrency)
        transport = self.transport
        if transport is None and not self.allow_private:
            transport = _guarded_transport(limits)
        async with httpx.AsyncClient(
            timeout=self.timeout,
            follow_redirects=False,
            headers={"user-agent": self.user_agent},
            transport=transport,
            limits=limits,
        ) as client:
            crawler.client = client
            async for document in crawler.run():
                yield document


@dataclass
class _Page:
    url: str
    documents: list[Document]
    links: list[str]
    unchanged: list[str] = field(default_factory=list)
    """The ids a 304 keeps, if the index holds them all at ``version``."""
    version: str = ""


class _Crawler:
    def __init__(self, source: UrlsSource, ctx: SourceContext) -> None:
        self.source = source
        self.ctx = ctx
        self.client: httpx.AsyncClient | None = None
        self.robots: dict[str, urllib.robotparser.RobotFileParser | None] = {}
        self.robots_lock = asyncio.Lock()
        self.sites = {_site(u) for u in source.urls}
        self.queued: set[str] = set(source.urls)
        self.fetched = 0

    async def run(self) -> AsyncIterator[Document]:
        wave = list(self.source.urls)
        semaphore = asyncio.Semaphore(self.source.concurrency)
        while wave:
            if self.ctx.cancellation.is_set():
                self.ctx.incomplete("the read was cancelled")
                return
            # page 1 of a PDF tells how many pages a 304 keeps
            stored = await self.ctx.stored([i for url in wave for i in (url, url + PAGE_FRAGMENT + "1")])

            pages = await asyncio.gather(*(self._limited(semaphore, url, stored) for url in wave))
            # one lookup for every 304 of the wave, not one per page
            kept = await self.ctx.unchanged(
                [(i, p.version) for p in pages if p is not None for i in p.unchanged]
            )
            again = [p.url for p in pages if p is not None and not kept.issuperset(p.unchanged)]
            if again:
                pages.extend(await asyncio.gather(*(self._limited(semaphore, url, {}) for url in again)))
            links: list[str] = []
            for page in pages:
                if page is None or (page.unchanged and not kept.issuperset(page.unchanged)):
                    continue
                for document in page.documents:
                    yield document
                links.extend(page.links)
            wave = self._next_wave(links)

    async def _limited(
        self, semaphore: asyncio.Semaphore, url: str, stored: dict[str, StoredVersion]
    ) -> _Page | None:
        async with semaphore:
            return await self._page(url, stored)

    def _next_wave(self, links: list[str]) -> list[str]:
        if not self.source.crawl:
            return []
        wave: list[str] = []
        for link in links:
            if len(self.queued) >= self.source.max_pages:
                break
            if link not in self.queued and _site(link) in self.sites:
                self.queued.add(link)
                wave.append(link)
        return wave

    async def _page(self, url: str, stored: dict[str, StoredVersion]) -> _Page | None:
        known = stored.get(url) or stored.get(url + PAGE_FRAGMENT + "1")
        try:
            return await self._fetch(url, known)
        except _Refused as refusal:
            self.ctx.on_error(f"skipped {url!r}: {refusal}")
        except _Failed as failure:
            message = f"{url!r}: {failure}; the read is incomplete"
            self.ctx.on_error(message)
            self.ctx.incomplete(message)
        return None

    async def _fetch(self, url: str, known: StoredVersion | None) -> _Page | None:
        assert self.client is not None
        headers: dict[str, str] = {}
        validator, pages = _parse_version(known.version) if known is not None else (None, 0)
        if validator is not None:
            kind, _, value = validator.partition(":")
            headers["if-none-match" if kind == "etag" else "if-modified-since"] = value
        target = url
        for _ in range(MAX_REDIRECTS + 1):
            await self._allowed(target)
            try:
                request = self.client.build_request("GET", target, headers=headers)
                response = await self.client.send(request, stream=True)
            except httpx.TimeoutException:
                raise _Failed("timed out") from None
            except httpx.HTTPError as error:
                raise _Failed(f"could not be fetched ({type(error).__name__}: {error})") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    target = urldefrag(urljoin(target, response.headers["location"]))[0]
                    continue
                return await self._answer(url, target, response, known, pages)
            finally:
                if not response.is_stream_consumed:
                    # a 304, a redirect or an error page read to its end keeps the connection for
                    # the next request; closed unread, it is dropped
                    await _read_body(response, _DRAIN_BYTES)
                await response.aclose()
        raise _Refused(f"more than {MAX_REDIRECTS} redirects")

    async def _answer(
        self, url: str, final: str, response: httpx.Response, known: StoredVersion | None, pages: int
    ) -> _Page | None:
        status = response.status_code
        if status == 304 and known is not None:
            ids = [url] if pages == 0 else [f"{url}{PAGE_FRAGMENT}{n}" for n in range(1, pages + 1)]
            links = (known.metadata or {}).get("links", []) if pages == 0 else []
            return _Page(url, [], [str(link) for link in links], ids, known.version)
        if status in _GONE_STATUSES:
            self.ctx.on_error(f"{url!r} answered {status}: its document is deleted")
            return None
        if status >= 500 or status in _INCOMPLETE_STATUSES:
            raise _Failed(f"answered {status}")
        if status != 200:
            raise _Refused(f"answered {status}")
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        limit = MAX_PDF_BYTES if content_type == _PDF else self.source.max_bytes
        body = await _read_body(response, limit)
        if body is None:
            raise _Refused(f"its body is over {limit} bytes")
        version = _version(response)
        if content_type == _PDF:
            try:
                # parsing and extraction run in a thread: the event loop keeps the pass's heartbeats
                pdf = await asyncio.to_thread(read_pdf, body)
            except PdfProblem as problem:
                raise _Refused(str(problem)) from None
            name = urlsplit(final).path.rpartition("/")[2] or final
            stamp = f"{version}{PDF_PAGES}{len(pdf.pages)}" if version else None
            return _Page(url, page_documents(url, final, pdf, name, stamp), [])
        if content_type in _HTML:
            text, title, links = await asyncio.to_thread(_html, body, final)
        elif content_type in _TEXT:
            text = body.decode(response.encoding or "utf-8", errors="replace")
            title, links = first_heading(text), []
        else:
            raise _Refused(f"its content type {content_type or 'is missing'!r} is not HTML, text or PDF")
        # no crawl follows more than max_pages links, so no page keeps more
        links = [link for link in links if len(link) <= MAX_ID_CHARS][: self.source.max_pages]
        links = links if self.source.crawl else []
        metadata: dict[str, Any] | None = {"links": links} if self.source.crawl else None
        document = Document(
            id=url, content=text, title=title or final, source=final, metadata=metadata, version=version
        )
        return _Page(url, [document], links)

    async def _allowed(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _Refused(f"{url!r} is no http(s) URL")
        if self.source.transport is not None and not self.source.allow_private:
            # a transport of one's own connects as it likes: its names are checked here, not pinned
            port = parts.port or (443 if parts.scheme == "https" else 80)
            await _public_addresses(parts.hostname, port, self.source.timeout)
        if self.source.robots and not await self._robots_allow(url):
            raise _Refused("robots.txt disallows it")

    async def _robots_allow(self, url: str) -> bool:
        site = _site(url)
        async with self.robots_lock:
            if site not in self.robots:
                self.robots[site] = await self._robots(site)
        parser = self.robots[site]
        return parser is None or parser.can_fetch(self.source.user_agent, url)

    async def _robots(self, site: str) -> urllib.robotparser.RobotFileParser | None:
        """The site's rules; None (all allowed) when it has none; a failure makes the read incomplete."""
        assert self.client is not None
        try:
            # not followed: a redirect could lead to an address the pages may not reach
            response = await self.client.get(f"{site}/robots.txt")
        except httpx.HTTPError as error:
            raise _Failed(f"its site's robots.txt could not be fetched ({type(error).__name__})") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise _Failed(f"its site's robots.txt answered {response.status_code}")
        if response.status_code != 200:
            return None
        parser = urllib.robotparser.RobotFileParser()
        parser.parse(response.text.splitlines())
        return parser


async def _read_body(response: httpx.Response, limit: int) -> bytes | None:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _version(response: httpx.Response) -> str | None:
    etag = response.headers.get("etag")
    if etag:
        return f"etag:{etag}"
    modified = response.headers.get("last-modified")
    return f"modified:{modified}" if modified else None


def _parse_version(version: str) -> tuple[str | None, int]:
    """The validator of a stored version and, for a PDF, its number of pages."""
    validator, _, pages = version.partition(PDF_PAGES)
    if not validator.startswith(("etag:", "modified:")):
        return None, 0
    return validator, int(pages) if pages.isdigit() else 0


def _html(body: bytes, base: str) -> tuple[str, str | None, list[str]]:
    import lxml.html
    import trafilatura

    text = trafilatura.extract(body, output_format="txt", include_comments=False) or ""
    meta = trafilatura.extract_metadata(body)
    title = meta.title if meta is not None and meta.title else None
    links: list[str] = []
    try:
        tree = lxml.html.fromstring(body)
    except (ValueError, lxml.etree.ParserError):
        return text, title, links
    for href in tree.xpath("//a/@href"):
        link = urldefrag(urljoin(base, str(href)))[0]
        if urlsplit(link).scheme in ("http", "https") and link not in links:
            links.append(link)
    return text, title, links


def _site(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


_IPV4_IN_LOW_BITS = (
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible (deprecated)
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (SIIT)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, well-known prefix
)
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
"""Local-use NAT64 (RFC 8215): where it leads is the local network's choice, so it is never public."""


def _is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``address`` reaches the public internet, IPv4 carried inside IPv6 included.

    Python's ``is_global`` calls ``::127.0.0.1``, ``64:ff9b::10.0.0.1`` and ``2002:7f00:1::``
    global, yet a host that routes those forms (NAT64, 6to4, a dual stack) delivers to the IPv4
    address inside: it is judged instead.
    """
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return True
    if address in _LOCAL_NAT64:
        return False
    inner = address.ipv4_mapped or address.sixtofour
    if inner is None and any(address in network for network in _IPV4_IN_LOW_BITS):
        inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return inner is None or _is_public(inner)


def _not_public(host: str) -> bool:
    """Whether ``host`` names a loopback host or is an address that is not public; False for a name."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return not _is_public(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return False


async def _public_addresses(host: str, port: int, timeout: float | None) -> list[str]:
    """The addresses ``host`` resolves to, once, when every one of them is public.

    Raises:
        _Refused: ``host`` is, or resolves to, an address that is not public.
        _Failed: ``host`` does not resolve, or not within ``timeout`` seconds.
    """
    if _not_public(host):
        raise _Refused(f"{host!r} is a private or loopback address: pass allow_private=True to read it")
    try:
        async with asyncio.timeout(timeout):
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise _Failed(f"its host {host!r} did not resolve within {timeout} s") from None
    except OSError as error:
        raise _Failed(f"its host {host!r} does not resolve ({error.strerror or error})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        if _not_public(address):
            raise _Refused(
                f"{host!r} resolves to the private or loopback address {address}: "
                "pass allow_private=True to read it"
            )
    return addresses


class _PublicOnly(httpcore.AsyncNetworkBackend):
    """Connects to the addresses it checked: a name is resolved once, here, never again by the socket.

    Checking a name and then letting the socket resolve it leaves a window where a DNS answer that
    changed (rebinding) sends the request to an internal service; connecting to the checked address
    closes it. TLS is unaffected: httpcore verifies the certificate and sends SNI for the URL's name,
    not for the address connected to. The pool stays keyed by name, so a connection never serves
    another site that shares its address.
    """

    def __init__(self) -> None:
        self._sockets = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A connection to the first of ``host``'s public addresses that answers."""
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in await _public_addresses(host, port, timeout):
            try:
                return await self._sockets.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None  # getaddrinfo answers at least one address or raises
        raise failure

    async def sleep(self, seconds: float) -> None:
        """Waits as the sockets' backend does (httpcore's retries)."""
        await self._sockets.sleep(seconds)


def _guarded_transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """The transport of httpx, connecting through :class:`_PublicOnly`.

    httpx takes no network backend, so its connection pool is replaced by one built with the same
    settings and this backend. A client given a transport takes no proxy from the environment,
    which the guard needs: a proxy resolves names where they cannot be checked.
    """
    transport = httpx.AsyncHTTPTransport(limits=limits)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_PublicOnly(),
    )
    return transport


def urls(
    pages: Iterable[str],
    *,
    crawl: bool = False,
    max_pages: int = 100,
    allow_private: bool = False,
    trusted: bool | None = False,
    timeout: float = 20.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    concurrency: int = 8,
    robots: bool = True,
    transport: httpx.AsyncBaseTransport | None = None,
) -> UrlsSource:
    """Web pages, fetched on every pass with conditional requests (see the module docstring).

    Args:
        pages: the http(s) URLs to read; each is the id of its document.
        crawl: follow links to pages of the same sites (scheme and host), breadth first.
        max_pages: how many pages a crawl reads at most, the listed ones included.
        allow_private: read loopback and private addresses (an internal docs site); only then is a
            proxy from the environment used.
        trusted: untrusted by default: a search over the pages taints the run.
        timeout: seconds one request may take.
        max_bytes: the largest HTML or text body read (PDFs: 32 MiB).
        concurrency: requests in flight at once.
        robots: obey each site's ``robots.txt``.
        transport: an httpx transport to send the requests through (tests, proxies); unless
            ``allow_private``, its names are checked before each request but not pinned.

    Raises:
        InvalidAgentDefinitionError: a URL or option is invalid.
    """
    if isinstance(pages, str):
        raise InvalidAgentDefinitionError(f"urls() takes a list of URLs, not the string {pages!r}")
    listed = tuple(pages)
    if not listed:
        raise InvalidAgentDefinitionError("urls() got no URL: list at least one http(s) page")
    for url in listed:
        if not isinstance(url, str):
            raise InvalidAgentDefinitionError(f"urls(): {url!r} is not a string")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidAgentDefinitionError(
                f"urls(): {url!r} is not an http(s) URL with a host, e.g. 'https://docs.example.com/'"
            )
        if parts.fragment:
            raise InvalidAgentDefinitionError(f"urls(): {url!r} has a fragment: list the page without '#...'")
        if len(url) > MAX_ID_CHARS - 16:
            raise InvalidAgentDefinitionError(
                f"urls(): {url[:80]!r}... is over {MAX_ID_CHARS - 16} characters"
            )
    if len(set(listed)) != len(listed):
        raise InvalidAgentDefinitionError("urls() lists a URL twice: list each page once")
    for option, value in (("max_pages", max_pages), ("max_bytes", max_bytes), ("concurrency", concurrency)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidAgentDefinitionError(f"urls() {option} must be a positive integer, not {value!r}")
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidAgentDefinitionError(
            f"urls() timeout must be a positive number of seconds, not {timeout!r}"
        )
    if trusted is not None and not isinstance(trusted, bool):
        raise InvalidAgentDefinitionError("urls() trusted must be True, False or None")
    source = UrlsSource(
        urls=listed,
        crawl=bool(crawl),
        max_pages=max(max_pages, len(listed)),
        allow_private=bool(allow_private),
        trusted=trusted,
        timeout=float(timeout),
        max_bytes=max_bytes,
        concurrency=concurrency,
        robots=bool(robots),
        transport=transport,
    )
    source.check()
    return source
