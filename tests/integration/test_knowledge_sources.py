"""urls(), git() and PDF documents, indexed for real by passes over Qdrant Edge in a temp folder."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpcore
import pytest

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge import folder, git, knowledge_collection, urls
from chamvi.knowledge._pdf import PdfLimits, PdfText, read_pdf
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.repos import GitSource
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.knowledge.sources import RACY_SECONDS, SourceContext
from tests.knowledge_helpers import CountingEmbedder, new_store
from tests.support.pdfs import page_tree_bomb, text_pdf


@dataclass
class Site:
    """Pages served on loopback: path -> (status, etag, body, content type); requests are logged."""

    pages: dict[str, tuple[int, str, bytes, str]] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    robots: bytes = b"User-agent: *\nDisallow: /private/\n"
    base: str = ""
    hits: int = 0
    """Every request that reached the site, robots.txt included."""


FILLER = (
    "<p>Our team reviews every request carefully and answers by email within two working days, "
    "with the reference of the order and the name of the person who handled it.</p>"
)


def html(title: str, body: str, links: str = "", *, nav: bool = True) -> bytes:
    menu = '<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li></ul></nav>'
    return (
        f"<html><head><title>{title}</title></head><body>{menu if nav else ''}"
        f"<article><h1>{title}</h1><p>{body}</p>{FILLER}{links}</article>"
        "<footer>Copyright footer</footer></body></html>"
    ).encode()


@pytest.fixture
def site() -> Iterator[Site]:
    state = Site()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.hits += 1
            if self.path == "/robots.txt":
                self._send(200, state.robots, "text/plain", None)
                return
            state.requests.append((self.path, self.headers.get("if-none-match")))
            page = state.pages.get(self.path)
            if page is None:
                self._send(404, b"gone", "text/plain", None)
                return
            status, etag, body, kind = page
            if status == 0:  # too slow
                time.sleep(1.5)
                status = 200
            if status in (301, 302):  # the body is where to
                self.send_response(status)
                self.send_header("location", body.decode())
                self.send_header("content-length", "0")
                self.end_headers()
                return
            if status == 200 and self.headers.get("if-none-match") == etag:
                self._send(304, b"", kind, etag)
                return
            self._send(status, body, kind, etag)

        def _send(self, status: int, body: bytes, kind: str, etag: str | None) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            if etag:
                self.send_header("etag", etag)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def registry(embedder: CountingEmbedder) -> EmbeddingRegistry:
    embedders = EmbeddingRegistry()
    embedders.register(embedder.ref, embedder)
    return embedders


async def test_a_url_site_indexes_changes_deletes_on_404_and_keeps_everything_on_a_500(site: Site) -> None:
    site.pages = {
        "/a": (200, '"a1"', html("Refunds", "Refunds are paid within 14 days."), "text/html; charset=utf-8"),
        "/b": (200, '"b1"', html("Shipping", "We ship worldwide."), "text/html"),
        "/c": (200, '"c1"', b"# Notes\n\nPlain notes.", "text/plain"),
    }
    embedder = CountingEmbedder()
    source = urls([f"{site.base}/a", f"{site.base}/b", f"{site.base}/c"], allow_private=True)
    collection = knowledge_collection("web", model=embedder.ref, sources=[source])
    store = new_store()
    indexer = Indexer(store, registry(embedder))

    meta = await indexer.run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.embedded == 3
    assert meta.trusted is False, "urls() is untrusted by default: a search over it taints the run"
    found = await KnowledgeSearch(store, registry(embedder)).search(
        ["web"], "Refunds are paid within 14 days"
    )
    assert found.untrusted and found.matches[0].document == f"{site.base}/a"
    assert "About us" not in found.matches[0].text, "trafilatura keeps the main text, not the menu"

    # unchanged: conditional requests only, no embedding call
    calls, site.requests[:] = embedder.calls, []
    meta = await indexer.run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.unchanged == 3
    assert embedder.calls == calls
    assert sorted(site.requests) == [("/a", '"a1"'), ("/b", '"b1"'), ("/c", '"c1"')]

    # /a changed (new ETag), /b fails: the read is incomplete and nothing is deleted
    site.pages["/a"] = (200, '"a2"', html("Refunds", "Refunds are paid within 30 days."), "text/html")
    site.pages["/b"] = (500, "", b"down", "text/plain")
    meta = await indexer.run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.embedded == 1 and meta.last_stats.deleted == 0
    assert any("answered 500" in reason for reason in meta.last_stats.incomplete)
    assert meta.documents == 3

    # /b is back, /c is gone: its document is deleted
    site.pages["/b"] = (200, '"b1"', html("Shipping", "We ship worldwide."), "text/html")
    del site.pages["/c"]
    meta = await indexer.run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.deleted == 1 and not meta.last_stats.incomplete
    assert meta.documents == 2


async def test_urls_crawl_follows_same_site_links_within_the_page_limit_and_obeys_robots(site: Site) -> None:
    links = (
        '<a href="/two">two</a> <a href="/private/x">secret</a> <a href="https://elsewhere.example/">out</a>'
    )
    site.pages = {
        "/one": (200, '"1"', html("One", "Page one.", links, nav=False), "text/html"),
        "/two": (200, '"2"', html("Two", "Page two.", '<a href="/three">three</a>'), "text/html"),
        "/three": (200, '"3"', html("Three", "Page three."), "text/html"),
        "/private/x": (200, '"x"', html("Secret", "Hidden."), "text/html"),
        "/": (200, '"r"', html("Root", "The root."), "text/html"),
    }
    seen: list[str] = []
    source = urls([f"{site.base}/one"], crawl=True, max_pages=3, allow_private=True)
    documents = [d.id async for d in source.documents(SourceContext(on_error=seen.append))]
    # wave 1: /one; wave 2: /two and /private/x (refused), the limit reached before /three
    assert documents == [f"{site.base}/one", f"{site.base}/two"]
    assert any("robots.txt disallows it" in problem for problem in seen)
    assert "/private/x" not in [path for path, _ in site.requests]


async def test_a_loopback_url_is_refused_unless_allow_private(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="allow_private=True"):
        urls([f"{site.base}/a"])
    with pytest.raises(InvalidAgentDefinitionError, match="not an http"):
        urls(["ftp://example.com/x"])

    # a name that resolves to loopback, or to a public address and loopback, gets no request at all
    port = int(site.base.rsplit(":", 1)[1])
    for answer in (["127.0.0.1"], ["93.184.215.14", "127.0.0.1"], ["64:ff9b::7f00:1"]):

        async def resolves(host: str, _port: int, answer: list[str] = answer, **_: object) -> list[object]:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answer]

        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolves)
        problems: list[str] = []
        source = urls([f"http://docs.internal.example:{port}/a"])
        assert [d async for d in source.documents(SourceContext(on_error=problems.append))] == []
        assert problems and f"resolves to the private or loopback address {answer[-1]}" in problems[0]
    assert site.hits == 0


async def test_urls_follows_redirects_and_skips_unknown_types_and_bodies_over_the_limit(site: Site) -> None:
    site.pages = {
        "/old": (301, "", b"/new", "text/plain"),
        "/new": (200, '"n"', b"# New home\n\nMoved here.", "text/markdown; charset=utf-8"),
        "/loop": (302, "", b"/loop", "text/plain"),
        "/logo.png": (200, '"l"', b"\x89PNG", "image/png"),
        "/big": (200, '"b"', b"x" * 2048, "text/plain"),
    }
    problems: list[str] = []
    ctx = SourceContext(on_error=problems.append)
    source = urls([f"{site.base}{p}" for p in site.pages], allow_private=True, max_bytes=1024)
    documents = [d async for d in source.documents(ctx)]
    assert [(d.id, d.source, d.title) for d in documents] == [
        (f"{site.base}/old", f"{site.base}/new", "New home"),
        (f"{site.base}/new", f"{site.base}/new", "New home"),
    ]
    assert not ctx.is_incomplete
    assert any("/loop" in p and "more than 5 redirects" in p for p in problems)
    assert any("/logo.png" in p and "'image/png' is not HTML, text or PDF" in p for p in problems)
    assert any("/big" in p and "over 1024 bytes" in p for p in problems)


async def test_a_page_that_times_out_marks_the_read_incomplete(site: Site) -> None:
    site.pages = {"/slow": (0, '"s"', b"late", "text/plain"), "/ok": (200, '"o"', b"fine", "text/plain")}
    problems: list[str] = []
    ctx = SourceContext(on_error=problems.append)
    source = urls([f"{site.base}/slow", f"{site.base}/ok"], allow_private=True, timeout=0.5)
    assert [d.id async for d in source.documents(ctx)] == [f"{site.base}/ok"]
    assert ctx.is_incomplete and "timed out" in ctx.reasons[0]


async def test_a_name_is_resolved_once_and_connected_to_at_the_address_checked(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.pages = {"/a": (200, '"a"', b"internal secrets", "text/plain")}
    port = int(site.base.rsplit(":", 1)[1])
    resolved: list[str] = []
    answers = iter(["93.184.215.14"])  # public for the check, then the site on loopback (rebinding)

    async def rebinding(host: str, _port: int, **_: object) -> list[tuple[object, ...]]:
        resolved.append(host)
        address = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    connected: list[tuple[str, int]] = []
    connect_tcp = httpcore.AnyIOBackend.connect_tcp

    async def connect(backend: httpcore.AnyIOBackend, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        connected.append((host, port))
        if host == "93.184.215.14":  # no packet leaves the machine
            raise httpcore.ConnectError("unreachable in this test")
        return await connect_tcp(backend, host, port, *args, **kwargs)

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", rebinding)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect)
    problems: list[str] = []
    ctx = SourceContext(on_error=problems.append)
    source = urls([f"http://docs.example.test:{port}/a"])
    assert [d async for d in source.documents(ctx)] == []
    assert site.hits == 0
    assert connected == [("93.184.215.14", port)]
    assert resolved == ["docs.example.test"]
    assert ctx.is_incomplete and "could not be fetched (ConnectError" in problems[0]


def make_pdf(path: Path, pages: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 10, text)
    pdf.output(str(path))


async def test_a_two_page_pdf_in_a_folder_is_found_by_page(tmp_path: Path) -> None:
    make_pdf(
        tmp_path / "manual.pdf", ["Unpack the device and charge it.", "Warranty claims need the receipt."]
    )
    make_pdf(tmp_path / "scan.pdf", [""])
    embedder = CountingEmbedder()
    collection = knowledge_collection("pdfs", model=embedder.ref, sources=[folder(tmp_path)])
    store = new_store()
    meta = await Indexer(store, registry(embedder)).run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.skipped == 1, "the scan has no text layer"
    assert meta.documents == 2
    found = await KnowledgeSearch(store, registry(embedder)).search(
        ["pdfs"], "Warranty claims need the receipt."
    )
    assert found.matches[0].document == "manual.pdf#page=2"
    assert found.matches[0].source == "manual.pdf#page=2"


async def test_an_unchanged_pdf_in_a_folder_is_not_read_again_and_a_changed_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_pdf(tmp_path / "manual.pdf", ["Unpack the device and charge it.", "Warranty needs the receipt."])
    await asyncio.sleep(RACY_SECONDS + 0.2)  # older than the window in which times cannot tell
    parsed: list[int] = []
    original = read_pdf

    def counting(data: bytes, limits: PdfLimits | None = None) -> PdfText:
        parsed.append(len(data))
        return original(data, limits)

    monkeypatch.setattr("chamvi.knowledge.sources.read_pdf", counting)
    embedder = CountingEmbedder()
    collection = knowledge_collection("pdfs", model=embedder.ref, sources=[folder(tmp_path)])
    indexer = Indexer(new_store(), registry(embedder))
    await indexer.run_pass(collection)
    assert len(parsed) == 1
    meta = await indexer.run_pass(collection)
    assert len(parsed) == 1, "size and times unchanged: the PDF is not read again"
    assert meta.last_stats is not None and meta.last_stats.unchanged == 2 and meta.documents == 2

    make_pdf(tmp_path / "manual.pdf", ["Unpack the device.", "Warranty needs the receipt.", "Page three."])
    await asyncio.sleep(RACY_SECONDS + 0.2)
    meta = await indexer.run_pass(collection)
    assert len(parsed) == 2 and meta.documents == 3


async def test_a_page_tree_bomb_is_skipped_with_its_reason_and_the_rest_of_the_pass_is_indexed(
    tmp_path: Path,
) -> None:
    (tmp_path / "bomb.pdf").write_bytes(page_tree_bomb())
    make_pdf(
        tmp_path / "manual.pdf", ["Unpack the device and charge it.", "Warranty claims need the receipt."]
    )
    (tmp_path / "notes.md").write_text("# Notes\n\nThe office opens at nine.\n")
    embedder = CountingEmbedder()
    collection = knowledge_collection("pdfs", model=embedder.ref, sources=[folder(tmp_path)])
    store = new_store()
    meta = await Indexer(store, registry(embedder)).run_pass(collection)

    reason = "skipped 'bomb.pdf': document too large: 97 336 pages, limit 2 000"
    stats = meta.last_stats
    assert stats is not None and (stats.read, stats.skipped, stats.failed) == (3, 1, 0)
    assert stats.problems == [reason] and reason in stats.line()
    entry = await store.entry("pdfs", "bomb.pdf")
    assert entry is not None and (entry.status, entry.error, entry.passages) == ("failed", reason, 0)
    search = KnowledgeSearch(store, registry(embedder))
    warranty = await search.search(["pdfs"], "Warranty claims need the receipt.")
    office = await search.search(["pdfs"], "The office opens at nine.")
    assert (warranty.matches[0].document, office.matches[0].document) == ("manual.pdf#page=2", "notes.md")

    again = await Indexer(store, registry(embedder)).run_pass(collection)
    assert again.last_stats is not None and again.last_stats.problems == [reason]
    assert await store.entry("pdfs", "bomb.pdf") is not None, "the skipped PDF stays listed as failed"


async def test_a_pdf_that_takes_longer_than_its_budget_is_skipped_and_the_rest_of_the_pass_is_indexed(
    tmp_path: Path,
) -> None:
    (tmp_path / "long.pdf").write_bytes(text_pdf([f"Chapter {n}" for n in range(1, 9)]))
    (tmp_path / "a.md").write_text("The office opens at nine.\n")
    (tmp_path / "b.md").write_text("Parking is behind the building.\n")
    ticks = itertools.count()
    # every look at the clock is a second later: the PDF's read outlasts its 3 s
    limits = PdfLimits(max_seconds=3, clock=lambda: float(next(ticks)))
    source = dataclasses.replace(folder(tmp_path), pdf_limits=limits)
    embedder = CountingEmbedder()
    collection = knowledge_collection("timed", model=embedder.ref, sources=[source])
    store = new_store()
    meta = await Indexer(store, registry(embedder)).run_pass(collection)

    reason = "skipped 'long.pdf': extraction took longer than 3 s"
    assert meta.last_stats is not None and meta.last_stats.problems == [reason]
    entry = await store.entry("timed", "long.pdf")
    assert entry is not None and (entry.status, entry.error) == ("failed", reason)
    found = await KnowledgeSearch(store, registry(embedder)).search(
        ["timed"], "Parking is behind the building."
    )
    assert found.matches[0].document == "b.md"
    assert {d.id async for d in store.entries("timed")} >= {"a.md", "b.md", "long.pdf"}


async def test_a_pdf_url_is_one_document_per_page_and_a_304_keeps_them_all(
    site: Site, tmp_path: Path
) -> None:
    make_pdf(tmp_path / "m.pdf", ["First page text.", "Second page text."])
    site.pages = {"/m.pdf": (200, '"p1"', (tmp_path / "m.pdf").read_bytes(), "application/pdf")}
    embedder = CountingEmbedder()
    source = urls([f"{site.base}/m.pdf"], allow_private=True)
    collection = knowledge_collection("webpdf", model=embedder.ref, sources=[source])
    indexer = Indexer(new_store(), registry(embedder))
    meta = await indexer.run_pass(collection)
    assert meta.documents == 2
    calls = embedder.calls
    meta = await indexer.run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.unchanged == 2 and embedder.calls == calls


def run_git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin",
        },
    ).stdout.strip()


async def test_a_git_pass_reads_only_the_blobs_that_changed_since_the_last_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    run_git(repo, "init", "--quiet", "-b", "main")
    for name in ("a", "b", "c"):
        (repo / "docs" / f"{name}.md").write_text(f"# {name.upper()}\n\nAbout {name}.\n")
    (repo / "docs" / "image.png").write_bytes(b"\x89PNG")
    (repo / "README.md").write_text("# Outside docs\n")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "--quiet", "-m", "one")

    read: list[list[str]] = []
    original = GitSource.read_blobs

    async def counting(self: GitSource, files: list[tuple[str, str]]) -> list[tuple[str, str, bytes]]:
        read.append(sorted(rel for rel, _ in files))
        return await original(self, files)

    monkeypatch.setattr(GitSource, "read_blobs", counting)
    embedder = CountingEmbedder()
    source = git(f"file://{repo}", ref="main", path="docs", cache=tmp_path / "cache")
    collection = knowledge_collection("repo", model=embedder.ref, sources=[source])
    indexer = Indexer(new_store(), registry(embedder))
    meta = await indexer.run_pass(collection)
    assert meta.documents == 3 and meta.trusted is False
    assert read[-1] == ["a.md", "b.md", "c.md"]

    (repo / "docs" / "b.md").write_text("# B\n\nAbout b, revised.\n")
    run_git(repo, "commit", "--quiet", "-am", "two")
    meta = await indexer.run_pass(collection)
    assert read[-1] == ["b.md"], "the branch moved to commit two: only b's blob changed"
    assert meta.last_stats is not None and meta.last_stats.embedded == 1

    run_git(repo, "rm", "--quiet", "docs/c.md")
    run_git(repo, "commit", "--quiet", "-m", "three")
    meta = await indexer.run_pass(collection)
    assert read[-1] == []
    assert meta.last_stats is not None and meta.last_stats.deleted == 1 and meta.documents == 2


async def test_a_git_ref_that_does_not_exist_marks_the_read_incomplete(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "--quiet", "-b", "main")
    problems: list[str] = []
    ctx = SourceContext(on_error=problems.append)
    source = git(f"file://{repo}", ref="nope", cache=tmp_path / "cache")
    assert [d async for d in source.documents(ctx)] == []
    assert ctx.is_incomplete and "'nope'" in problems[0]
    with pytest.raises(InvalidAgentDefinitionError, match="ref"):
        git(f"file://{repo}", ref="main:docs")
