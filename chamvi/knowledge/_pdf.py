"""PDF documents: the text of each page, as one document per page, read with pypdf.

A page is a document (``guide.pdf#page=2``: the fragment PDF viewers open at that page), so every
passage belongs to one page, its document's metadata holds the page number (``{"page": 2}``) and a
search result names the page in its ``document`` and ``source``. pypdf is pure Python (no native
library to build or ship), maintained by the py-pdf organisation, and reads text layers page by page.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from chamvi.knowledge.documents import Document

PDF_SUFFIX = ".pdf"
MAX_PDF_BYTES = 32 * 1_048_576
DEFAULT_MAX_PDF_PAGES = 2_000
"""The most pages a PDF may have: past it, the PDF is skipped before any page is read (a 1.6 KB file
whose page tree references one node again and again expands to a hundred thousand pages)."""
DEFAULT_MAX_PDF_SECONDS = 60.0
"""How long reading one PDF may take: past it, the PDF is skipped and the pass goes on."""
_CLOCK_EVERY = 1_024
"""Page tree entries walked between two looks at the clock while counting pages."""
PAGE_FRAGMENT = "#page="
PDF_PAGES = " pages="
"""Ends the version of a PDF's pages: ``<the file's version> pages=<count>``, so a source that finds
page 1 unchanged knows which other pages to count unchanged without reading the file."""

# pypdf logs a warning for every oddity of a file it can still read (a wrong xref offset): noise in
# the worker's log for a document that indexes fine
logging.getLogger("pypdf").setLevel(logging.ERROR)


class PdfProblem(Exception):
    """A PDF that cannot be indexed; the message says why (encrypted, damaged, no text layer)."""


class PdfLimitReached(PdfProblem):
    """A PDF past a limit of :class:`PdfLimits`: too many pages, or reading it took too long."""


def _spaced(number: int | float) -> str:
    """``97 336``: thousands apart by a space, as the pass's report writes counts."""
    return f"{number:,}".replace(",", " ")


@dataclass(frozen=True)
class PdfLimits:
    """How far reading one PDF may go.

    Attributes:
        max_pages: the most pages, counted in the page tree before any page is read.
        max_seconds: how long parsing, counting and extracting may take together; looked at
            between pages and while a page's content is read, so a slow page stops the read too.
        clock: seconds, monotonic (tests hand in their own).
    """

    max_pages: int = DEFAULT_MAX_PDF_PAGES
    max_seconds: float = DEFAULT_MAX_PDF_SECONDS
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_pages, bool) or not isinstance(self.max_pages, int) or self.max_pages < 1:
            raise ValueError(f"max_pdf_pages must be a positive integer, not {self.max_pages!r}")
        if (
            isinstance(self.max_seconds, bool)
            or not isinstance(self.max_seconds, int | float)
            or not self.max_seconds > 0
        ):
            raise ValueError(
                f"max_pdf_seconds must be a positive number of seconds, not {self.max_seconds!r}"
            )


@dataclass
class _Deadline:
    limits: PdfLimits
    at: float = 0.0

    def __post_init__(self) -> None:
        self.at = self.limits.clock() + self.limits.max_seconds

    def check(self) -> None:
        if self.limits.clock() > self.at:
            raise PdfLimitReached(f"extraction took longer than {self.limits.max_seconds:g} s")


@dataclass(frozen=True)
class PdfText:
    """The text of each page of a PDF, in order, and the title its metadata gives, if any."""

    pages: list[str]
    title: str | None


def read_pdf(data: bytes, limits: PdfLimits | None = None) -> PdfText:
    """The text of every page of ``data``, within ``limits`` (by default 2 000 pages and 60 s).

    Raises:
        PdfLimitReached: the page tree holds more pages than ``limits.max_pages`` (counted before
            any page is read, each shared node once), or reading took longer than
            ``limits.max_seconds``.
        PdfProblem: the file is no PDF pypdf can read, is encrypted, or has no text layer at all
            (a scan): indexing it would store nothing anyone can find.
    """
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    limits = limits or PdfLimits()
    deadline = _Deadline(limits)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise PdfProblem("it is encrypted: save an unencrypted copy")
        deadline.check()
        _check_page_count(reader.root_object.get("/Pages"), limits.max_pages, deadline)

        def looking(*_: Any) -> None:
            deadline.check()

        pages = []
        for page in reader.pages:
            deadline.check()
            pages.append((page.extract_text(visitor_operand_before=looking) or "").strip())
        info = reader.metadata
        title = info.title if info is not None else None
    except PdfProblem:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as error:
        raise PdfProblem(f"it is no readable PDF ({type(error).__name__}: {error})") from None
    if not any(pages):
        raise PdfProblem(f"none of its {len(pages)} page(s) has a text layer (a scan?): run OCR on it first")
    return PdfText(pages, title.strip() if isinstance(title, str) and title.strip() else None)


@dataclass
class _Node:
    """A ``/Pages`` node being counted: its kids still to walk, and what those walked hold."""

    key: int
    kids: Iterator[Any]
    pages: int = 0
    nodes: int = 1


def _kids(node: Any) -> list[Any] | None:
    """A ``/Pages`` node's kids; None for a page (pypdf's rule: no ``/Type`` and no ``/Kids`` is a page)."""
    kind = node.get("/Type")
    if kind == "/Page" or (kind is None and "/Kids" not in node):
        return None
    kids = node.get("/Kids")
    kids = kids.get_object() if kids is not None else None
    return list(kids) if isinstance(kids, list) else []


def _check_page_count(root: Any, limit: int, deadline: _Deadline) -> None:
    """Counts the pages of the tree below ``root`` without expanding it; refuses more than ``limit``.

    Each node is counted once and its count reused wherever the tree references it again, so a
    page tree bomb (one node referenced many times, at many levels) costs its size in the file, not
    the pages it expands to. A node that contains itself is refused. The ``/Pages`` nodes are counted
    as pages are: pypdf walks each one as often as the tree references it.

    Raises:
        PdfLimitReached: more pages, or more ``/Pages`` nodes, than ``limit``.
        PdfProblem: the tree loops.
    """
    from pypdf.generic import DictionaryObject

    root = root.get_object() if root is not None else None
    if not isinstance(root, DictionaryObject) or _kids(root) is None:
        return  # pypdf reports a missing or odd tree itself
    counted: dict[int, tuple[int, int]] = {}
    kept: list[Any] = [root]  # the ids of ``counted`` stay theirs while the objects live
    path: set[int] = {id(root)}
    stack = [_Node(id(root), iter(_kids(root) or []))]
    walked = 0
    while True:
        top = stack[-1]
        kid = next(top.kids, None)
        if kid is None:
            stack.pop()
            path.discard(top.key)
            counted[top.key] = (top.pages, top.nodes)
            if not stack:
                break
            stack[-1].pages += top.pages
            stack[-1].nodes += top.nodes
            continue
        walked += 1
        if walked % _CLOCK_EVERY == 0:
            deadline.check()
        node = kid.get_object()
        if not isinstance(node, DictionaryObject):
            continue
        key = id(node)
        if key in counted:
            pages, nodes = counted[key]
            top.pages += pages
            top.nodes += nodes
        elif key in path:
            raise PdfProblem("its page tree contains itself: the file is damaged")
        else:
            kids = _kids(node)
            if kids is None:
                top.pages += 1
                continue
            kept.append(node)
            path.add(key)
            stack.append(_Node(key, iter(kids)))
    pages, nodes = counted[id(root)]
    if pages > limit:
        raise PdfLimitReached(f"document too large: {_spaced(pages)} pages, limit {_spaced(limit)}")
    if nodes > limit:
        raise PdfLimitReached(
            f"document too large: its page tree has {_spaced(nodes)} nodes, limit {_spaced(limit)}"
        )


def page_documents(
    base_id: str, source: str, pdf: PdfText, fallback_title: str, version: str | None = None
) -> list[Document]:
    """One document per page, ``<base_id>#page=<n>``; a page without text is an empty document."""
    title = pdf.title or fallback_title
    return [
        Document(
            id=f"{base_id}{PAGE_FRAGMENT}{number}",
            content=text,
            title=title,
            source=f"{source}{PAGE_FRAGMENT}{number}",
            metadata={"page": number},
            version=version,
        )
        for number, text in enumerate(pdf.pages, start=1)
    ]
