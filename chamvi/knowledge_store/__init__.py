"""A curated knowledge base: an agent's own wiki of linked pages, read and written through tools.

``KnowledgeStore`` is the interface; ``FileKnowledgeStore`` keeps the pages as markdown files a
person can open; ``VectorKnowledgeStore`` adds search by meaning through a knowledge collection;
``knowledge_store_tools`` gives an agent the tools.
"""

from typing import Any

from chamvi.errors import (
    EditMismatchError,
    InvalidPageError,
    KnowledgeStoreError,
    LogUnavailableError,
    MissingLinksError,
    PageExistsError,
    PageFormatError,
    PageNotFoundError,
    PageStatusError,
)
from chamvi.knowledge_store._ids import SLUG_PATTERN, is_id, is_slug, linked_ids, parse_id, slugify
from chamvi.knowledge_store._types import (
    ACTIVE,
    BUILT_IN_PAGE_TYPES,
    RETIRED,
    SUPERSEDED,
    CheckReport,
    FieldChanges,
    FieldValue,
    KnowledgePage,
    LinkRef,
    NewPage,
    PageInfo,
    PageType,
    SearchHit,
    resolve_page_types,
)
from chamvi.knowledge_store.files import FileKnowledgeStore
from chamvi.knowledge_store.protocol import KnowledgeStore, LogReader
from chamvi.knowledge_store.tools import knowledge_store_tools
from chamvi.knowledge_store.vector import (
    Searcher,
    VectorKnowledgeStore,
    request_sync_from_activity,
    store_collection,
    store_source,
)

__all__ = [
    "ACTIVE",
    "BUILT_IN_PAGE_TYPES",
    "RETIRED",
    "SLUG_PATTERN",
    "SUPERSEDED",
    "CheckReport",
    "EditMismatchError",
    "FieldChanges",
    "FieldValue",
    "FileKnowledgeStore",
    "InvalidPageError",
    "KnowledgePage",
    "KnowledgeStore",
    "KnowledgeStoreError",
    "LinkRef",
    "LogReader",
    "LogUnavailableError",
    "MissingLinksError",
    "NewPage",
    "PageExistsError",
    "PageFormatError",
    "PageInfo",
    "PageNotFoundError",
    "PageStatusError",
    "PageType",
    "SearchHit",
    "Searcher",
    "VectorKnowledgeStore",
    "is_id",
    "is_slug",
    "knowledge_store_tools",
    "linked_ids",
    "parse_id",
    "request_sync_from_activity",
    "resolve_page_types",
    "searcher_of",
    "slugify",
    "store_collection",
    "store_source",
]


def __getattr__(name: str) -> Any:
    """``searcher_of``, still importable from here, loaded on first use.

    It asks the worker serving an App (``chamvi.worker_state``), which stands above this package: an
    alias of the old import path, never imported by chamvi itself.
    """
    if name == "searcher_of":
        from chamvi.worker_state import searcher_of

        return searcher_of
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
