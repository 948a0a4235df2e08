"""Search by meaning: a store wrapper that indexes the pages into a knowledge collection.

The pages stay where the inner store keeps them (the source of truth); a knowledge collection built
by :func:`store_collection` embeds every live page on each pass, and ``search()`` ranks pages by the
similarity of their passages to the query. Everything but ``search()`` is the inner store's.

Wiring it into an app (``searcher_of`` is ``chamvi.worker_state``'s: it asks the worker serving the app)::

    files = FileKnowledgeStore("wiki")
    wiki = VectorKnowledgeStore(files, collection="wiki", search=lambda: searcher_of(app))
    app = App(agents=[...], collections=[store_collection(wiki, model="local/all-minilm-l6-v2")])

After every write the wrapper calls ``on_change(collection)``; the default asks the collection for a
pass when it runs inside a Temporal activity (a tool call), so the index follows the agent's writes.
"""

from __future__ import annotations

import builtins
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Protocol

from temporalio import activity

from chamvi._starters import request_sync
from chamvi.errors import (
    InvalidAgentDefinitionError,
    InvalidPageError,
    KnowledgeNotReadyError,
    LogUnavailableError,
)
from chamvi.knowledge.collections import KnowledgeCollection, knowledge_collection
from chamvi.knowledge.documents import Document
from chamvi.knowledge.search import SearchResult
from chamvi.knowledge.sources import CustomSource, define_source
from chamvi.knowledge_store._types import (
    RETIRED,
    CheckReport,
    FieldChanges,
    KnowledgePage,
    NewPage,
    PageInfo,
    PageType,
    SearchHit,
)
from chamvi.knowledge_store.protocol import KnowledgeStore

log = logging.getLogger(__name__)

_SNIPPET_CHARS = 160


class Searcher(Protocol):
    """What ranks passages of collections (``chamvi.knowledge.search.KnowledgeSearch``)."""

    async def search(
        self, collections: Sequence[str], query: str, *, top_k: int = 5, min_score: float | None = None
    ) -> SearchResult:
        """The ``top_k`` passages of ``collections`` nearest in meaning to ``query``, best first."""
        ...


SearcherRef = Searcher | Callable[[], Searcher | None]
OnChange = Callable[[str], Awaitable[None] | None]


async def request_sync_from_activity(collection: str) -> None:
    """Asks ``collection`` for a pass when called inside a Temporal activity; elsewhere does nothing.

    Outside an activity (a script, the CLI) the collection catches up at its next pass: the next
    worker start, its ``resync``, or ``chamvi knowledge sync``.
    """
    if not activity.in_activity():
        return
    await request_sync(activity.client(), activity.info().task_queue, collection)


class VectorKnowledgeStore:
    """A :class:`KnowledgeStore` whose ``search()`` ranks by meaning, over any inner store.

    Args:
        inner: where the pages live; every other method is its own.
        collection: the knowledge collection indexing the pages (declare it with
            :func:`store_collection`).
        search: the searcher, or a function answering it when a search runs (a worker builds the
            searcher after the app is defined: ``lambda: searcher_of(app)``).
        on_change: called with the collection's name after every write to the pages; the default
            requests a pass from inside a tool call. Its failures are logged, never raised: the
            write is done, and the next pass catches up.

    Until the collection has finished its first pass, or without a searcher, ``search()`` answers
    the inner store's own search. Hits are pages (the best passage of each), never retired ones.
    """

    def __init__(
        self,
        inner: KnowledgeStore,
        *,
        collection: str,
        search: SearcherRef | None = None,
        on_change: OnChange | None = request_sync_from_activity,
    ) -> None:
        if not isinstance(collection, str) or not collection:
            raise InvalidAgentDefinitionError("VectorKnowledgeStore needs collection=<collection name>")
        self.inner = inner
        self.collection = collection
        self._search = search
        self._on_change = on_change

    def __repr__(self) -> str:
        return f"VectorKnowledgeStore({self.inner!r}, collection={self.collection!r})"

    def types(self) -> tuple[PageType, ...]:
        """The inner store's page types (the index adds none)."""
        return self.inner.types()

    async def list(self) -> builtins.list[PageInfo]:
        """The inner store's live pages."""
        return await self.inner.list()

    async def read(self, page_id: str) -> KnowledgePage | None:
        """The inner store's page, retired ones too."""
        return await self.inner.read(page_id)

    async def index(self) -> str:
        """The inner store's catalogue of live pages."""
        return await self.inner.index()

    async def check(self) -> CheckReport:
        """The inner store's link check; the index is not checked."""
        return await self.inner.check()

    async def overview(self) -> str:
        """The inner store's overview page."""
        return await self.inner.overview()

    async def recent_log(self, limit: int = 10) -> builtins.list[str]:
        """The inner store's latest log entries, newest first.

        Raises:
            LogUnavailableError: the inner store keeps no log it can show.
        """
        reader = getattr(self.inner, "recent_log", None)
        if reader is None:
            raise LogUnavailableError("this knowledge store cannot show its log")
        entries: builtins.list[str] = await reader(limit)
        return entries

    async def log(self, operation: str, what: str, pages: Sequence[str] = ()) -> None:
        """Records finished work in the inner store's log; the log is not indexed, so no pass is asked for."""
        await self.inner.log(operation, what, pages)

    async def write_overview(self, content: str) -> None:
        """Replaces the inner store's overview; the overview is not indexed, so no pass is asked for."""
        await self.inner.write_overview(content)

    async def create(
        self, type: str, slug: str, title: str, content: str, fields: FieldChanges | None = None
    ) -> str:
        """Creates the page in the inner store, then asks the collection to index it."""
        page_id = await self.inner.create(type, slug, title, content, fields)
        await self._changed()
        return page_id

    async def create_many(self, pages: Sequence[NewPage]) -> builtins.list[str]:
        """Creates the pages in the inner store (all or none), then asks the collection to index them."""
        ids = await self.inner.create_many(pages)
        if ids:
            await self._changed()
        return ids

    async def edit(
        self, page_id: str, old_text: str, new_text: str, fields: FieldChanges | None = None
    ) -> None:
        """Edits the page in the inner store, then asks the collection to index the new text."""
        await self.inner.edit(page_id, old_text, new_text, fields)
        await self._changed()

    async def rewrite(self, page_id: str, content: str, fields: FieldChanges | None = None) -> None:
        """Rewrites the page in the inner store, then asks the collection to index the new text."""
        await self.inner.rewrite(page_id, content, fields)
        await self._changed()

    async def supersede(self, page_id: str, by: str, reason: str | None = None) -> None:
        """Marks the page superseded in the inner store, then asks the collection for a pass."""
        await self.inner.supersede(page_id, by, reason)
        await self._changed()

    async def retire(self, page_id: str, reason: str) -> None:
        """Retires the page in the inner store, then asks the collection to drop it from the index."""
        await self.inner.retire(page_id, reason)
        await self._changed()

    async def _changed(self) -> None:
        if self._on_change is None:
            return
        try:
            result = self._on_change(self.collection)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            log.warning(
                "knowledge store: the pages changed but collection %r was not asked for a pass: %s",
                self.collection,
                error,
            )

    def _searcher(self) -> Searcher | None:
        ref = self._search
        if ref is None:
            return None
        if callable(ref) and not hasattr(ref, "search"):
            return ref()
        return ref  # type: ignore[return-value]

    async def search(self, query: str, limit: int = 10) -> builtins.list[SearchHit]:
        """The live pages whose passages are nearest in meaning to ``query``, one hit per page, best first.

        Falls back to the inner store's own search until the collection finished its first pass.

        Raises:
            InvalidPageError: the query is empty or ``limit`` is not a positive integer.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidPageError("the query is empty: say what to look for")
        if not isinstance(limit, int) or limit < 1:
            raise InvalidPageError(f"limit must be a positive integer, got {limit!r}")
        searcher = self._searcher()
        if searcher is None:
            return await self.inner.search(query, limit)
        try:
            # a page has several passages: ask for more than the pages wanted
            result = await searcher.search([self.collection], query, top_k=min(limit * 4, 200))
        except KnowledgeNotReadyError:
            return await self.inner.search(query, limit)
        live = {info.id: info for info in await self.inner.list()}
        hits: dict[str, SearchHit] = {}
        for match in result.matches:
            info = live.get(match.document)
            if info is None or match.document in hits:
                continue  # retired (or gone) since the last pass, or a lower passage of a page listed
            hits[match.document] = SearchHit(
                id=info.id,
                type=info.type,
                title=info.title,
                score=round(match.score, 4),
                snippet=_snippet(match.text, info.title),
                status=info.status,
            )
            if len(hits) >= limit:
                break
        return builtins.list(hits.values())


def _snippet(text: str, title: str) -> str:
    text = " ".join(text.split())
    text = text.removeprefix(f"# {title}").strip()
    return text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 1].rstrip() + "…"


def _page_document(page: KnowledgePage) -> Document:
    return Document(
        id=page.id,
        content=f"# {page.title}\n\n{page.content}",
        title=page.title,
        source=page.id,
        metadata={"type": page.type, "status": page.status},
    )


def store_source(store: KnowledgeStore) -> CustomSource:
    """A knowledge source yielding every live page of ``store`` as one document (id = page id)."""
    inner = store.inner if isinstance(store, VectorKnowledgeStore) else store

    async def documents() -> AsyncIterator[Document]:
        bulk = getattr(inner, "pages", None)
        if callable(bulk):
            for page in await bulk():
                if page.status != RETIRED:
                    yield _page_document(page)
            return
        for info in await inner.list():
            page = await inner.read(info.id)
            if page is not None and page.status != RETIRED:
                yield _page_document(page)

    return define_source(kind="knowledge-store", documents=documents)


def store_collection(
    store: KnowledgeStore,
    name: str | None = None,
    *,
    model: str,
    resync: timedelta | None = None,
    trusted: bool | None = None,
) -> KnowledgeCollection:
    """The knowledge collection that indexes ``store``'s pages, embedded by ``model``.

    ``name`` defaults to a :class:`VectorKnowledgeStore`'s ``collection``. Declare the result in
    the app's ``collections=``.

    Raises:
        InvalidAgentDefinitionError: no name, or a name other than the wrapper's collection.
    """
    if isinstance(store, VectorKnowledgeStore):
        if name is not None and name != store.collection:
            raise InvalidAgentDefinitionError(
                f"store_collection: the store searches collection {store.collection!r}, not {name!r}"
            )
        name = store.collection
    if name is None:
        raise InvalidAgentDefinitionError("store_collection needs the collection's name")
    return knowledge_collection(
        name, model=model, sources=[store_source(store)], resync=resync, trusted=trusted
    )
