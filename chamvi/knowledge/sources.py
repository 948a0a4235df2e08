"""Sources feed a knowledge collection: ``folder(...)`` and your own ``define_source(...)``.

A source yields the whole set of its documents on every pass (a snapshot, not a feed of changes):
the pass compares it with the index, so what a source no longer yields is deleted, unless the
source marked its read incomplete.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import logging
import os
import re
import stat
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge._pdf import (
    DEFAULT_MAX_PDF_PAGES,
    DEFAULT_MAX_PDF_SECONDS,
    MAX_PDF_BYTES,
    PAGE_FRAGMENT,
    PDF_PAGES,
    PDF_SUFFIX,
    PdfLimitReached,
    PdfLimits,
    PdfProblem,
    page_documents,
    read_pdf,
)
from chamvi.knowledge.documents import Document, describe_id

log = logging.getLogger(__name__)

DEFAULT_EXTENSIONS: tuple[str, ...] = (".md", ".markdown", ".mdx", ".txt", PDF_SUFFIX)
MAX_FILE_BYTES = 1_048_576
MAX_PATH_CHARS = 255
ASK_TIMEOUT_SECONDS = 120.0
RACY_SECONDS = 2
"""A file changed this close to a pass's start may change again within its times' resolution (up to
2 s on some filesystems) without them moving: it is read, never trusted by its version (git's
"racily clean" entries)."""

# files are read in a worker thread a batch at a time, so a slow disk never stalls the event loop
# (and the activity's heartbeats) while a thread hop per file would cost more than the read
_BATCH_FILES = 64
_BATCH_BYTES = 4 * MAX_FILE_BYTES
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK = "a symbolic link (never followed)"


def _log_problem(message: str) -> None:
    log.warning("knowledge source: %s", message)


def _ignore(reason: str) -> None:
    pass


async def _nothing_known(versions: list[tuple[str, str]]) -> set[str]:
    return set()


async def _nothing_stored(ids: list[str]) -> dict[str, StoredVersion]:
    return {}


async def _nothing_recorded(document: Document, reason: str) -> None:
    pass


@dataclass(frozen=True)
class StoredVersion:
    """What the index keeps of a document a pass may skip: its version and its metadata."""

    version: str
    metadata: dict[str, Any] | None = None


@dataclass
class SourceContext:
    """Handed to a source on every pass.

    Attributes:
        cancellation: set when the pass is cancelled; a source stops reading soon after.
        on_error: reports a problem (a skipped document); the pass logs it and goes on.
        incomplete: marks this read incomplete (``ctx.incomplete(reason)``): the pass then deletes
            nothing and does not switch generations. The callback given here is told too.
        reasons: why the read is incomplete, in order.
        unchanged: ``await ctx.unchanged([(id, version), ...])`` answers the ids whose stored entry
            has that version; the pass counts them read and unchanged, so the source yields nothing
            for them. A source that can tell a document's version without reading it (a file's size
            and times, an ETag) asks before reading, and reads only the others.
        stored: ``await ctx.stored([id, ...])`` answers, for the ids whose stored entry
            ``unchanged`` would accept, its version and metadata: what a source needs to ask the other
            side whether a document changed (an ETag for ``If-None-Match``) before it reads it.
        record_failure: keeps a document the source skipped in the registry as failed, with the
            reason (the pass's; :meth:`failed` calls it).
    """

    cancellation: asyncio.Event = field(default_factory=asyncio.Event)
    on_error: Callable[[str], None] = _log_problem
    incomplete: Callable[[str], None] = _ignore
    reasons: list[str] = field(default_factory=list)
    unchanged: Callable[[list[tuple[str, str]]], Coroutine[Any, Any, set[str]]] = _nothing_known
    stored: Callable[[list[str]], Coroutine[Any, Any, dict[str, StoredVersion]]] = _nothing_stored
    record_failure: Callable[[Document, str], Coroutine[Any, Any, None]] = _nothing_recorded

    async def failed(self, document: Document, reason: str) -> None:
        """Reports a document skipped past a limit (a PDF's pages, its time), and keeps it as failed.

        ``on_error`` gets ``reason``; the registry keeps ``document`` as failed with it, where a
        document listing shows it.
        """
        self.on_error(reason)
        await self.record_failure(document, reason)

    def __post_init__(self) -> None:
        notify = self.incomplete

        def incomplete(reason: str) -> None:
            self.reasons.append(reason)
            notify(reason)

        self.incomplete = incomplete

    @property
    def is_incomplete(self) -> bool:
        """Whether anything marked this read incomplete, in which case the pass deletes nothing."""
        return bool(self.reasons)


@runtime_checkable
class Source(Protocol):
    """Anything that yields the documents of a collection.

    ``documents(ctx)`` yields :class:`~chamvi.knowledge.documents.Document` objects or mappings
    with ``id``, ``content`` and optionally ``title``, ``source`` and ``metadata``; the pass checks
    each one. ``check()`` raises :class:`~chamvi.errors.InvalidAgentDefinitionError` for a
    configuration error, found at boot.
    """

    @property
    def kind(self) -> str:
        """What the source is (``folder``, ``custom``, ...), named in the problems a pass logs."""
        ...

    @property
    def trusted(self) -> bool | None:
        """False marks content from outside the deploy; None counts as trusted.

        A collection's own ``trusted``, when set, overrides it.
        """
        ...

    def check(self) -> None:
        """Raises :class:`~chamvi.errors.InvalidAgentDefinitionError` for a bad configuration, at boot."""
        ...

    def documents(self, ctx: SourceContext) -> AsyncIterator[object]:
        """Every document of the source, on every pass; problems go to ``ctx``."""
        ...


@dataclass(frozen=True)
class CustomSource:
    """A source made by :func:`define_source`."""

    kind: str
    trusted: bool | None
    check_fn: Callable[[], None] | None = field(repr=False)
    documents_fn: Callable[..., Any] = field(repr=False)
    takes_context: bool = True

    def check(self) -> None:
        """Runs the configuration check given to :func:`define_source`, if any, at boot."""
        if self.check_fn is not None:
            self.check_fn()

    async def documents(self, ctx: SourceContext) -> AsyncIterator[object]:
        """The documents your function yields, stopping (and marking the read incomplete) once cancelled.

        Raises:
            InvalidAgentDefinitionError: the function returned a coroutine or no async iterable.
        """
        produced = self.documents_fn(ctx) if self.takes_context else self.documents_fn()
        if inspect.iscoroutine(produced):
            produced.close()
            raise InvalidAgentDefinitionError(
                f"source {self.kind!r}: documents() returned a coroutine: make it an async generator "
                "(async def with yield) or return an async iterable"
            )
        if not isinstance(produced, AsyncIterable):
            raise InvalidAgentDefinitionError(
                f"source {self.kind!r}: documents() returned a {type(produced).__name__}, "
                "not an async iterable: make it an async generator (async def with yield)"
            )
        iterator = aiter(produced)
        try:
            async for item in iterator:
                if ctx.cancellation.is_set():
                    ctx.incomplete("the read was cancelled")
                    return
                yield item
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()


def define_source(
    *,
    kind: str = "custom",
    trusted: bool | None = None,
    check: Callable[[], None] | None = None,
    documents: Callable[[SourceContext], AsyncIterable[object]] | Callable[[], AsyncIterable[object]],
) -> CustomSource:
    """Your own source: ``documents`` yields every document on each pass.

    ``documents`` is an async generator function (or any function returning an async iterable)
    taking the :class:`SourceContext`, or no parameter at all when it needs none of it.
    ``trusted=False`` marks content from outside the deploy: a search over it taints the run.
    ``check`` validates the configuration at boot and raises
    :class:`~chamvi.errors.InvalidAgentDefinitionError` when it is wrong.
    """
    if not isinstance(kind, str) or not kind.strip():
        raise InvalidAgentDefinitionError(f"define_source(kind={kind!r}): kind must be a non-empty string")
    if trusted is not None and not isinstance(trusted, bool):
        raise InvalidAgentDefinitionError(f"source {kind!r}: trusted must be True, False or None")
    if check is not None:
        if not callable(check):
            raise InvalidAgentDefinitionError(f"source {kind!r}: check must be a function")
        if inspect.iscoroutinefunction(check):
            raise InvalidAgentDefinitionError(f"source {kind!r}: check must be a plain function, not async")
    if not callable(documents):
        raise InvalidAgentDefinitionError(f"source {kind!r}: documents must be an async generator function")
    if inspect.isgeneratorfunction(documents):
        raise InvalidAgentDefinitionError(
            f"source {kind!r}: documents is a plain generator: write it as `async def` so reading never "
            "blocks the worker"
        )
    return CustomSource(
        kind=kind,
        trusted=trusted,
        check_fn=check,
        documents_fn=documents,
        takes_context=_takes_context(documents, kind),
    )


def _takes_context(fn: Callable[..., Any], kind: str) -> bool:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True  # no signature to read (a builtin): hand it the context
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    required_keyword = [p for p in parameters if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > 1 or required_keyword:
        raise InvalidAgentDefinitionError(
            f"source {kind!r}: documents must take one parameter (the SourceContext) or none"
        )
    return bool(positional) or any(p.kind == p.VAR_POSITIONAL for p in parameters)


# --- folder() -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FolderSource:
    """Every file with one of ``extensions`` below ``path`` (an absolute path), in path order."""

    path: Path
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    trusted: bool | None = None
    kind: str = "folder"
    pdf_limits: PdfLimits = field(default_factory=PdfLimits)

    def check(self) -> None:
        """Refuses at boot a path that is not a directory, rather than at the first pass.

        Raises:
            InvalidAgentDefinitionError: ``path`` is not a directory.
        """
        if not self.path.is_dir():
            raise InvalidAgentDefinitionError(f"folder() path {str(self.path)!r} is not a directory")

    async def documents(self, ctx: SourceContext) -> AsyncIterator[Document]:
        """Yields the files as documents, reporting each one it skips through ``ctx``.

        Symbolic links, files that are no regular file, files over 1 MiB, files that are not UTF-8
        and relative paths over 255 characters are reported and skipped (so the pass deletes them).
        A PDF past ``pdf_limits`` (its pages, the time reading it takes) is reported and skipped,
        and the registry keeps it as failed with the reason.
        A folder that cannot be listed or a file that cannot be read is reported and marks the read
        incomplete (so what it held stays indexed); so does a cancellation.

        Like git, a file whose size, times and inode match what the index stored is not read
        (``ctx.unchanged``, asked once per folder): a no-op pass reads nothing but the listings. A
        file changed too recently for its times to tell (within ``RACY_SECONDS`` of the moment its
        folder is listed) gets no version, so it is read again next time.
        """
        self.check()
        loop = asyncio.get_running_loop()

        def answer(asking: Coroutine[Any, Any, _T], otherwise: _T) -> _T:
            # from the walk's thread: the event loop is free while the pass awaits that thread
            asked = asyncio.run_coroutine_threadsafe(asking, loop)
            try:
                return asked.result(timeout=ASK_TIMEOUT_SECONDS)
            except TimeoutError:  # a loop that stopped answering (a worker shutting down): read them all
                asked.cancel()
                return otherwise

        def ask(versions: list[tuple[str, str]]) -> set[str]:
            return answer(ctx.unchanged(versions), set())

        def look(ids: list[str]) -> dict[str, StoredVersion]:
            return answer(ctx.stored(ids), {})

        walker = _walk(str(self.path), self.extensions, _Asker(ask, look), self.pdf_limits)
        while True:
            if ctx.cancellation.is_set():
                ctx.incomplete("the read was cancelled")
                return
            batch = await asyncio.to_thread(_take, walker)
            if not batch:
                return
            for item in batch:
                if isinstance(item, _Problem):
                    if item.failed is not None:
                        await ctx.failed(item.failed, item.message)
                        continue
                    ctx.on_error(item.message)
                    if item.incomplete:
                        ctx.incomplete(item.message)
                    continue
                if ctx.cancellation.is_set():
                    ctx.incomplete("the read was cancelled")
                    return
                yield item


def folder(
    path: str | os.PathLike[str],
    *,
    extensions: Iterable[str] = DEFAULT_EXTENSIONS,
    trusted: bool | None = None,
    max_pdf_pages: int = DEFAULT_MAX_PDF_PAGES,
    max_pdf_seconds: float = DEFAULT_MAX_PDF_SECONDS,
) -> FolderSource:
    """Every ``.md``, ``.markdown``, ``.mdx``, ``.txt`` and ``.pdf`` file below ``path``.

    A PDF (up to 32 MiB) becomes one document per page, ``manual.pdf#page=2`` with the metadata
    ``{"page": 2}``; like a text file, it is not read again while its size and times match. A PDF
    without a text layer, encrypted or damaged is reported and skipped. So is one with more than
    ``max_pdf_pages`` pages (counted before any is read) or whose reading takes longer than
    ``max_pdf_seconds``: the pass's report gives the reason, the registry keeps the PDF as failed
    with it, and the rest of the pass goes on.

    ``path`` is resolved against the working directory now. Each document's id and source are its
    path relative to ``path`` (POSIX, ``guides/setup.md``); its title is the first ``# `` heading
    outside fenced code blocks, else the file name. Dot files and dot folders are skipped.
    """
    if isinstance(extensions, str):
        raise InvalidAgentDefinitionError(
            "folder() extensions must be a list of suffixes such as ['.md', '.txt'], "
            f"not the string {extensions!r}"
        )
    suffixes = tuple(extensions)
    if not suffixes:
        raise InvalidAgentDefinitionError(
            "folder() extensions is empty: name at least one suffix, e.g. '.md'"
        )
    for suffix in suffixes:
        if not isinstance(suffix, str) or not suffix.startswith(".") or len(suffix) < 2:
            raise InvalidAgentDefinitionError(
                f"folder() extension {suffix!r} is invalid: write suffixes with their dot, e.g. '.md'"
            )
    if trusted is not None and not isinstance(trusted, bool):
        raise InvalidAgentDefinitionError("folder() trusted must be True, False or None")
    try:
        limits = PdfLimits(max_pages=max_pdf_pages, max_seconds=max_pdf_seconds)
    except ValueError as error:
        raise InvalidAgentDefinitionError(f"folder() {error}") from None
    return FolderSource(
        path=Path(os.path.abspath(os.fspath(path))),
        extensions=tuple(s.lower() for s in suffixes),
        trusted=trusted,
        pdf_limits=limits,
    )


_HEADING = re.compile(r" {0,3}#(?:[ \t]+(.*)|[ \t]*)$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")


def first_heading(text: str) -> str | None:
    """The text of the first ``# `` heading outside fenced code blocks, if there is one."""
    fence: str | None = None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if fence is not None:
            if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence) and not marker[2].strip():
                fence = None
            continue
        if marker and not (marker[1][0] == "`" and "`" in marker[2]):
            fence = marker[1]
            continue
        heading = _HEADING.match(line)
        if heading and heading[1]:
            title = _CLOSING_HASHES.sub("", heading[1]).strip()
            if title:
                return title
    return None


@dataclass(frozen=True)
class _Problem:
    message: str
    incomplete: bool = False
    failed: Document | None = None
    """The document the registry keeps as failed, for a problem past a limit."""


def _skipped(rel: str, reason: str) -> _Problem:
    return _Problem(f"skipped {rel!r}: {reason}")


def _cannot(rel: str, what: str, error: OSError) -> _Problem:
    reason = error.strerror or type(error).__name__
    return _Problem(f"skipped {rel!r}: {what} ({reason}); the read is incomplete", incomplete=True)


def _take(walker: Iterator[Document | _Problem]) -> list[Document | _Problem]:
    batch: list[Document | _Problem] = []
    size = 0
    for item in walker:
        batch.append(item)
        if isinstance(item, Document):
            size += len(item.content)
        if len(batch) >= _BATCH_FILES or size >= _BATCH_BYTES:
            break
    return batch


def _sort_key(entry: os.DirEntry[str]) -> str:
    # a folder sorts as "name/", so walking folders in this order yields paths in sorted order
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name


def _list(folder_fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(folder_fd) as entries:
        return sorted(entries, key=_sort_key)


_T = TypeVar("_T")


@dataclass(frozen=True)
class _Asker:
    """What the walk's thread asks the index: which versions it holds unchanged, what it stored."""

    unchanged: Callable[[list[tuple[str, str]]], set[str]]
    stored: Callable[[list[str]], dict[str, StoredVersion]]


@dataclass
class _Folder:
    """A folder the walk is in: its descriptor, the rest of its listing, its files' versions."""

    prefix: str
    fd: int
    entries: Iterator[os.DirEntry[str]]
    versions: dict[str, str | None]
    unchanged: set[str]
    pdf_pages: dict[str, int] = field(default_factory=dict)
    """PDFs whose stored pages have their current version, and how many pages they had."""


def _walk(
    root: str, extensions: tuple[str, ...], ask: _Asker, pdf_limits: PdfLimits
) -> Iterator[Document | _Problem]:
    """Depth first, one folder's listing at a time: memory stays flat however large the tree.

    Every folder below the root and every file is opened relative to its parent's descriptor and
    without following a link, so a folder swapped for a link after it was listed (or after its
    parent was) cannot lead the walk out of the root: the swap is seen as a link, or the walk goes
    on reading the folder it had opened. The root itself may be a link: the app named it. Files
    whose version ``ask`` finds unchanged are passed over unread.
    """
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[_Folder] = []
    try:
        stack.append(_folder("", root_fd, _list(root_fd), extensions, ask))
    except BaseException:
        os.close(root_fd)
        raise
    try:
        while stack:
            here = stack[-1]
            entry = next(here.entries, None)
            if entry is None:
                stack.pop()
                os.close(here.fd)
                continue
            if entry.name.startswith("."):
                continue
            rel = here.prefix + entry.name
            wanted = entry.name.lower().endswith(extensions)
            try:
                if entry.is_symlink():
                    if wanted or entry.is_dir():
                        yield _skipped(rel, _LINK)
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError as error:
                yield _cannot(rel, "cannot be inspected", error)
                continue
            if is_dir:
                opened = _open_folder(here.fd, entry.name, rel)
                if isinstance(opened, _Problem):
                    yield opened
                else:
                    stack.append(_folder(rel + "/", *opened, extensions, ask))
            elif wanted and rel.lower().endswith(PDF_SUFFIX):
                pages = here.pdf_pages.get(rel)
                ids = {f"{rel}{PAGE_FRAGMENT}{n}" for n in range(1, (pages or 0) + 1)}
                if pages is None or not ids <= here.unchanged:
                    version = here.versions.get(rel)
                    yield from _read_pdf(here.fd, entry.name, rel, version, here.unchanged, pdf_limits)
            elif wanted and rel not in here.unchanged:
                yield _read(here.fd, entry.name, rel, here.versions.get(rel))
    finally:
        for folder in stack:
            os.close(folder.fd)


def _folder(
    prefix: str,
    fd: int,
    listing: list[os.DirEntry[str]],
    extensions: tuple[str, ...],
    ask: _Asker,
) -> _Folder:
    """A folder entered: the versions of its files, and which of them the index holds unchanged.

    A file is racy when it changed within ``RACY_SECONDS`` of this listing, not of the pass's start:
    any later change sets its change time (which no one can set back) past the one kept, so the
    version tells. A long first pass thus keeps the versions of files written just before it, and
    the next pass need not read them again and write each entry's version.
    """
    racy_after = time.time_ns() - RACY_SECONDS * 1_000_000_000
    versions: dict[str, str | None] = {}
    for entry in listing:
        if entry.name.startswith(".") or not entry.name.lower().endswith(extensions):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # the walk reports it when it comes to it
        if stat.S_ISREG(info.st_mode):
            versions[prefix + entry.name] = _version(info, racy_after)
    known = [
        (rel, version)
        for rel, version in versions.items()
        if version is not None and not rel.lower().endswith(PDF_SUFFIX)
    ]
    # a PDF's pages are its documents: page 1's stored version tells how many pages to ask about
    pdfs = {rel: v for rel, v in versions.items() if v is not None and rel.lower().endswith(PDF_SUFFIX)}
    first_pages = ask.stored([rel + PAGE_FRAGMENT + "1" for rel in pdfs]) if pdfs else {}
    pdf_pages: dict[str, int] = {}
    for rel, version in pdfs.items():
        stored = first_pages.get(rel + PAGE_FRAGMENT + "1")
        count = _pdf_pages(stored.version, version) if stored is not None else None
        if count is not None and stored is not None:
            pdf_pages[rel] = count
            known.extend((f"{rel}{PAGE_FRAGMENT}{n}", stored.version) for n in range(1, count + 1))
    unchanged = ask.unchanged(known) if known else set()
    return _Folder(prefix, fd, iter(listing), versions, unchanged, pdf_pages)


def _pdf_pages(stored: str, version: str) -> int | None:
    """The page count a stored PDF page version gives, if it is of the file's current version."""
    base, _, pages = stored.partition(PDF_PAGES)
    return int(pages) if base == version and pages.isdigit() else None


def _version(info: os.stat_result, racy_after: int) -> str | None:
    """Size, modification and change times and inode, as git compares them; None while racy."""
    if max(info.st_mtime_ns, info.st_ctime_ns) >= racy_after:
        return None
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"


def _open_folder(parent_fd: int, name: str, rel: str) -> tuple[int, list[os.DirEntry[str]]] | _Problem:
    """The folder's descriptor and its sorted listing, or the problem that stops the walk going in."""
    try:
        folder_fd = os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(parent_fd, name):
            return _skipped(rel, _LINK)
        return _cannot(rel, "the folder cannot be listed", error)
    try:
        return folder_fd, _list(folder_fd)
    except OSError as error:
        os.close(folder_fd)
        return _cannot(rel, "the folder cannot be listed", error)


def _is_link(parent_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read(folder_fd: int, name: str, rel: str, version: str | None) -> Document | _Problem:
    if len(rel) > MAX_PATH_CHARS:
        return _Problem(f"skipped {describe_id(rel)}: its relative path has {len(rel)} characters, over 255")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return _skipped(rel, "its path is not UTF-8")
    try:
        # lstat first: opening a FIFO would block, opening a device may act on it
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if not _is_small_regular(info):
            return _refused(rel, info)
        fd = os.open(name, _OPEN_FLAGS, dir_fd=folder_fd)
        with os.fdopen(fd, "rb") as file:
            opened = os.fstat(file.fileno())  # replaced since the lstat?
            if not _is_small_regular(opened):
                return _refused(rel, opened)
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        if error.errno == errno.ELOOP:  # swapped for a link since the lstat
            return _skipped(rel, _LINK)
        return _cannot(rel, "the file cannot be read", error)
    if len(data) > MAX_FILE_BYTES:
        return _skipped(rel, "over 1 MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _skipped(rel, "not UTF-8")
    text = text.removeprefix("\ufeff")
    title = first_heading(text) or rel.rpartition("/")[2]
    return Document(id=rel, content=text, title=title, source=rel, version=version)


def _is_small_regular(info: os.stat_result, limit: int = MAX_FILE_BYTES) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_size <= limit


def _read_pdf(
    folder_fd: int, name: str, rel: str, version: str | None, unchanged: set[str], limits: PdfLimits
) -> Iterator[Document | _Problem]:
    """The pages of a PDF as documents ``<rel>#page=<n>``, or the problem that keeps it out.

    Pages the index holds ``unchanged`` (counted already) are not yielded again. A PDF past
    ``limits`` is a problem with the document the registry keeps as failed.
    """
    if len(rel) + 16 > MAX_PATH_CHARS:
        yield _Problem(f"skipped {describe_id(rel)}: its relative path is too long for page ids")
        return
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if not _is_small_regular(info, MAX_PDF_BYTES):
            yield _skipped(rel, "not a regular file" if not stat.S_ISREG(info.st_mode) else "over 32 MiB")
            return
        fd = os.open(name, _OPEN_FLAGS, dir_fd=folder_fd)
        with os.fdopen(fd, "rb") as file:
            data = file.read(MAX_PDF_BYTES + 1)
    except OSError as error:
        if error.errno == errno.ELOOP:
            yield _skipped(rel, _LINK)
            return
        yield _cannot(rel, "the file cannot be read", error)
        return
    if len(data) > MAX_PDF_BYTES:
        yield _skipped(rel, "over 32 MiB")
        return
    try:
        pdf = read_pdf(data, limits)
    except PdfLimitReached as problem:
        failed = Document(id=rel, content="", title=rel.rpartition("/")[2], source=rel)
        yield _Problem(f"skipped {rel!r}: {problem}", failed=failed)
        return
    except PdfProblem as problem:
        yield _skipped(rel, str(problem))
        return
    stamp = f"{version}{PDF_PAGES}{len(pdf.pages)}" if version is not None else None
    for document in page_documents(rel, rel, pdf, rel.rpartition("/")[2], stamp):
        if document.id not in unchanged:
            yield document


def _refused(rel: str, info: os.stat_result) -> _Problem:
    if not stat.S_ISREG(info.st_mode):
        return _skipped(rel, "not a regular file")
    return _skipped(rel, f"over 1 MiB ({info.st_size} bytes)")
