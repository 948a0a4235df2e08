"""PDF documents: the text of each page, as one document per page, read with pypdf.

A page is a document (``guide.pdf#page=2``: the fragment PDF viewers open at that page), so every
passage belongs to one page, its document's metadata holds the page number (``{"page": 2}``) and a
search result names the page in its ``document`` and ``source``. pypdf is pure Python (no native
library to build or ship), maintained by the py-pdf organisation, and reads text layers page by page.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

from chamvi.knowledge.documents import Document

PDF_SUFFIX = ".pdf"
MAX_PDF_BYTES = 32 * 1_048_576
PAGE_FRAGMENT = "#page="
PDF_PAGES = " pages="
"""Ends the version of a PDF's pages: ``<the file's version> pages=<count>``, so a source that finds
page 1 unchanged knows which other pages to count unchanged without reading the file."""

# pypdf logs a warning for every oddity of a file it can still read (a wrong xref offset): noise in
# the worker's log for a document that indexes fine
logging.getLogger("pypdf").setLevel(logging.ERROR)


class PdfProblem(Exception):
    """A PDF that cannot be indexed; the message says why (encrypted, damaged, no text layer)."""


@dataclass(frozen=True)
class PdfText:
    """The text of each page of a PDF, in order, and the title its metadata gives, if any."""

    pages: list[str]
    title: str | None


def read_pdf(data: bytes) -> PdfText:
    """The text of every page of ``data``.

    Raises:
        PdfProblem: the file is no PDF pypdf can read, is encrypted, or has no text layer at all
            (a scan): indexing it would store nothing anyone can find.
    """
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise PdfProblem("it is encrypted: save an unencrypted copy")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        info = reader.metadata
        title = info.title if info is not None else None
    except PdfProblem:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as error:
        raise PdfProblem(f"it is no readable PDF ({type(error).__name__}: {error})") from None
    if not any(pages):
        raise PdfProblem(f"none of its {len(pages)} page(s) has a text layer (a scan?): run OCR on it first")
    return PdfText(pages, title.strip() if isinstance(title, str) and title.strip() else None)


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
