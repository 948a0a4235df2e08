"""The interface every knowledge store keeps, wherever it keeps its pages."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from chamvi.knowledge_store._types import (
    CheckReport,
    FieldChanges,
    KnowledgePage,
    NewPage,
    PageInfo,
    PageType,
    SearchHit,
)


@runtime_checkable
class KnowledgeStore(Protocol):
    """A curated, linked set of pages: what the knowledge tools read and write, never files.

    Rules every implementation keeps (``tests/knowledge_store/contract.py`` proves them):

    * Ids are ``type/slug`` and links in content are ``[text](type/slug)``, whatever the store keeps
      inside; ``read()`` and ``index()`` return them so.
    * Links must resolve: ``create``, ``create_many``, ``edit``, ``rewrite`` and ``write_overview``
      refuse a link to a page that does not exist, naming every missing id, and write nothing.
    * Pages are never deleted or renamed: ``supersede`` and ``retire`` mark them. A retired page leaves
      ``list()``, ``index()`` and ``search()``; ``read()`` still returns it.
    * ``edit`` replaces exactly one occurrence of ``old_text``.
    * A summary's ``ingested`` time is set by the store on ``create`` and ``rewrite``; its ``file``
      field is kept as given.

    ``types()`` is plain (it is configuration); every other method is a coroutine. ``recent_log`` is
    optional: see :class:`LogReader`.
    """

    def types(self) -> tuple[PageType, ...]:
        """The page types this store holds: the built-ins and the app's."""
        ...

    async def list(self) -> builtins.list[PageInfo]:
        """Every page but the retired ones, by id."""
        ...

    async def read(self, page_id: str) -> KnowledgePage | None:
        """The page (retired ones too) with ``linked_from``, or None when there is none."""
        ...

    async def create(
        self, type: str, slug: str, title: str, content: str, fields: FieldChanges | None = None
    ) -> str:
        """Creates a page and returns its id."""
        ...

    async def create_many(self, pages: Sequence[NewPage]) -> builtins.list[str]:
        """Creates pages that may link to each other: all of them or none."""
        ...

    async def edit(
        self, page_id: str, old_text: str, new_text: str, fields: FieldChanges | None = None
    ) -> None:
        """Replaces the one occurrence of ``old_text`` in the page's content."""
        ...

    async def rewrite(self, page_id: str, content: str, fields: FieldChanges | None = None) -> None:
        """Replaces the page's whole content."""
        ...

    async def supersede(self, page_id: str, by: str, reason: str | None = None) -> None:
        """Marks the page superseded by page ``by``."""
        ...

    async def retire(self, page_id: str, reason: str) -> None:
        """Marks the page retired: it leaves the listings, the index and search."""
        ...

    async def search(self, query: str, limit: int = 10) -> builtins.list[SearchHit]:
        """The live pages that best match ``query``, best first."""
        ...

    async def index(self) -> str:
        """The catalogue of live pages, as markdown linked by id."""
        ...

    async def log(self, operation: str, what: str, pages: Sequence[str] = ()) -> None:
        """Records finished work: ``## [YYYY-MM-DD] operation | what``; ``pages`` need not exist."""
        ...

    async def check(self) -> CheckReport:
        """Broken links, orphan pages and links to retired pages."""
        ...

    async def overview(self) -> str:
        """The overview page's content ("" before one is written)."""
        ...

    async def write_overview(self, content: str) -> None:
        """Replaces the overview."""
        ...


@runtime_checkable
class LogReader(Protocol):
    """The optional capability of showing the log: a store that has it defines ``recent_log``."""

    async def recent_log(self, limit: int = 10) -> builtins.list[str]:
        """The latest log entries, newest first.

        Raises:
            LogUnavailableError: a wrapper whose inner store has no log.
        """
        ...
