"""Errors of a knowledge store, each with a stable code.

Their messages are written for the model that called the tool: the knowledge tools hand them on as
tool errors, word for word, so each one says what is wrong and what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from chamvi.errors import ChamviError


class KnowledgeStoreError(ChamviError):
    """Base of the errors a knowledge store raises on purpose."""

    code = "knowledge_store_error"


class InvalidPageError(KnowledgeStoreError):
    """A bad id, slug, type, title or field: nothing was written."""

    code = "invalid_page"


class PageNotFoundError(KnowledgeStoreError):
    code = "page_not_found"


class PageExistsError(KnowledgeStoreError):
    """A create named an id that is taken (pages are never deleted, so a retired one counts too)."""

    code = "page_exists"


class MissingLinksError(KnowledgeStoreError):
    """Content links to pages that do not exist; ``missing`` names every one of them."""

    code = "missing_links"

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing: tuple[str, ...] = tuple(missing)


class EditMismatchError(KnowledgeStoreError):
    """``edit`` found its ``old_text`` no time or more than once."""

    code = "edit_mismatch"


class PageStatusError(KnowledgeStoreError):
    """The page's status forbids the change (editing a retired page, retiring it twice)."""

    code = "page_status"


class PageFormatError(KnowledgeStoreError):
    """A file in the store's folder cannot be read as a page (e.g. front matter it cannot parse)."""

    code = "page_format"


class LogUnavailableError(KnowledgeStoreError):
    """The store cannot show its log (``recent_log`` is optional)."""

    code = "log_unavailable"


KNOWLEDGE_STORE_ERRORS: tuple[type[KnowledgeStoreError], ...] = (
    KnowledgeStoreError,
    InvalidPageError,
    PageNotFoundError,
    PageExistsError,
    MissingLinksError,
    EditMismatchError,
    PageStatusError,
    PageFormatError,
    LogUnavailableError,
)
