"""Knowledge without the app: collections indexed and searched in this process, no Temporal worker.

The knowledge seed's ``createKnowledge(...)``: ``Knowledge(collections=[...])`` checks the
collections as ``App`` does, ``start()`` begins indexing (a pass per collection at once, then again
``resync`` after each one's last successful pass), ``sync(name)`` runs a pass now, ``search(...)``
ranks passages across collections, and ``stop()`` aborts the passes under way and waits for them.
``async with Knowledge(...) as knowledge:`` starts and stops it.

The rules are the worker's: passes of one collection run one at a time, and a ``sync`` during a pass
asks for exactly one more pass after it (never a parallel one); a failed pass is stored on the
collection with the time of its next attempt, reported to ``on_error`` (else logged as ``knowledge
error``) and tried again after 5 s, doubling up to 5 min per failure in a row. The same
:class:`~chamvi.knowledge.indexing.Indexer` and :class:`~chamvi.knowledge.search.KnowledgeSearch` do
the work, over the same index (Qdrant Edge in the data folder, or ``QDRANT_URL``), so an app
started later over the same index finds every collection ready and embeds nothing again.

What the worker's Temporal workflows add, this does not: the backoff and the resync clock live in
this process's memory (a restart passes at once), and nothing stops a second process from passing
the same collection beside this one; for replicas, serve the collections from an ``App``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType

from chamvi._lifecycle import check_index, close_index, index_location, open_index
from chamvi._on_error import ErrorHook, OnError
from chamvi.app import App
from chamvi.errors import (
    BackgroundError,
    ChamviError,
    InvalidAgentDefinitionError,
    InvalidAppError,
    InvalidRunStateError,
    NotFoundError,
)
from chamvi.knowledge.collections import KnowledgeCollection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KnowledgeSearch, SearchResult
from chamvi.models.knowledge import CollectionMeta
from chamvi.retry import RetryPolicies, backoff
from chamvi.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class _Collection:
    """One collection's passes: one at a time, and one more for every sync asked during a pass."""

    name: str
    declared: KnowledgeCollection | None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: list[asyncio.Future[CollectionMeta]] = field(default_factory=list)
    """The syncs the next pass answers."""
    cancellation: asyncio.Event = field(default_factory=asyncio.Event)
    failures: int = 0
    task: asyncio.Task[None] | None = None


class Knowledge:
    """Knowledge collections indexed and searched in this process (see the module docstring).

    Args:
        collections: the collections, declared with ``knowledge_collection(...)``, unique by name.
        settings: where the index is (``QDRANT_URL``, else Qdrant Edge in ``<data>/qdrant-edge``);
            ``Settings.from_env()`` when neither this nor ``index`` is given.
        index: an index to use instead (left open by ``stop()``).
        embedders: extra embedding providers or exact refs, on top of ``openai/...``,
            ``fastembed/...`` and ``local/...``.
        retry: how an embedding call is retried within a pass (``RetryPolicies.embedding``).
        on_error: ``on_error(error, None)`` for each failed pass, a
            :class:`~chamvi.errors.BackgroundError` with source ``knowledge``; by default logged.

    Raises:
        InvalidAppError, InvalidAgentDefinitionError: a collection that cannot work (a name declared
            twice, a model no provider serves, a source that fails its check).
    """

    def __init__(
        self,
        collections: Sequence[KnowledgeCollection],
        *,
        settings: Settings | None = None,
        index: KnowledgeIndex | None = None,
        embedders: EmbeddingRegistry | None = None,
        retry: RetryPolicies | None = None,
        on_error: OnError | None = None,
    ) -> None:
        # the App's own checks of collections, models and sources, word for word
        checked = App(agents=[], collections=collections, embedders=embedders, retry=retry)
        self.collections: dict[str, KnowledgeCollection] = dict(checked.collections)
        self.embedders = checked.embedders
        self._app = checked
        self._retry = checked.retry.embedding
        self._settings = settings
        self._index = index
        self._owns_index = index is None
        self._errors = ErrorHook(on_error)
        self._passes: dict[str, _Collection] = {}
        self._indexer: Indexer | None = None
        self._started = False

    @property
    def index(self) -> KnowledgeIndex:
        """The knowledge index, opened on first use when none was given.

        Raises:
            IndexUnavailableError: it cannot be opened (another process holds the local folder).
        """
        if self._index is None:
            self._index = open_index(self._settings or Settings.from_env())
        return self._index

    @property
    def searcher(self) -> KnowledgeSearch:
        """The search service (what ``knowledge_search`` tools read through ``KNOWLEDGE_SEARCH``)."""
        return KnowledgeSearch(
            self.index, self.embedders, retry=self._retry, declared=frozenset(self.collections)
        )

    async def start(self) -> None:
        """Checks the index against the collections and begins indexing: a pass each, in the background.

        Safe to call again. It never waits for a pass: ``sync(name)`` does.

        Raises:
            IndexUnavailableError: the index cannot be opened or read.
            InvalidAppError: a declared name is held by a managed collection in the index.
        """
        if self._started:
            return
        location = index_location(self._settings) if self._settings is not None else "the knowledge store"
        await check_index(self._app, self.index, location)
        self._indexer = Indexer(self.index, self.embedders, retry=self._retry)
        self._started = True
        for name, collection in self.collections.items():
            self._runner(name, collection).wake.set()

    def _runner(self, name: str, declared: KnowledgeCollection | None) -> _Collection:
        runner = self._passes.get(name)
        if runner is None:
            runner = _Collection(name, declared)
            runner.task = asyncio.create_task(self._loop(runner), name=f"chamvi knowledge {name}")
            self._passes[name] = runner
        return runner

    async def sync(self, name: str) -> CollectionMeta:
        """Runs a pass over ``name`` now, or one more right after the pass under way, and returns its end.

        A managed collection in the index (filled over REST) embeds its pending documents.

        Returns:
            The collection's meta once that pass ended: status, counts, the last pass's stats.

        Raises:
            InvalidRunStateError: ``start()`` was not called (or ``stop()`` was).
            NotFoundError: neither declared here nor a managed collection of the index.
            ChamviError: the pass failed (it is tried again on the backoff, as well).
        """
        if not self._started:
            raise InvalidRunStateError("knowledge is not started: call start() first, or use `async with`")
        declared = self.collections.get(name)
        if declared is None and name not in self._passes:
            meta = await self.index.meta(name)
            if meta is None or meta.kind != "managed":
                known = ", ".join(repr(n) for n in self.collections) or "none"
                raise NotFoundError(
                    f"no collection {name!r}: declared here are {known}, and the index holds no managed "
                    "collection of that name"
                )
        runner = self._runner(name, declared)
        answer: asyncio.Future[CollectionMeta] = asyncio.get_running_loop().create_future()
        runner.waiting.append(answer)
        runner.wake.set()
        return await answer

    async def search(
        self,
        query: str,
        *,
        collections: Sequence[str] | None = None,
        top_k: int = 5,
        min_score: float | None = None,
    ) -> SearchResult:
        """The ``top_k`` passages nearest in meaning to ``query`` across ``collections`` (default: all).

        Raises:
            ChamviValidationError: the query is empty, or ``top_k`` is out of range.
            KnowledgeNotReadyError: a collection has no complete generation yet.
        """
        names = list(collections) if collections is not None else list(self.collections)
        return await self.searcher.search(names, query, top_k=top_k, min_score=min_score)

    async def status(self, name: str) -> CollectionMeta | None:
        """What the index holds about ``name`` (status, model, generation, counts), None if nothing."""
        return await self.index.meta(name)

    async def _loop(self, runner: _Collection) -> None:
        """Passes of one collection, one at a time, until ``stop()``."""
        while True:
            delay = self._next_pass_in(runner)
            if delay is None:
                await runner.wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(runner.wake.wait(), delay)
            runner.wake.clear()
            answered, runner.waiting = runner.waiting, []
            try:
                meta = await self._pass(runner)
            except asyncio.CancelledError:
                for waiter in answered:
                    waiter.cancel()
                raise
            except Exception as error:
                for waiter in answered:
                    if not waiter.done():
                        waiter.set_exception(error)
                continue
            for waiter in answered:
                if not waiter.done():
                    waiter.set_result(meta)

    def _next_pass_in(self, runner: _Collection) -> float | None:
        """Seconds until the next pass nobody asked for: the backoff after a failure, else the resync."""
        if runner.failures:
            return backoff(runner.failures).total_seconds()
        resync = runner.declared.resync if runner.declared is not None else None
        return resync.total_seconds() if resync is not None else None

    async def _pass(self, runner: _Collection) -> CollectionMeta:
        indexer = self._indexer
        assert indexer is not None  # a runner exists only once started
        try:
            if runner.declared is not None:
                meta = await indexer.run_pass(runner.declared, cancellation=runner.cancellation)
            else:
                meta = await indexer.run_managed_pass(runner.name) or CollectionMeta(name=runner.name)
        except asyncio.CancelledError:
            raise
        except (InvalidAgentDefinitionError, InvalidAppError) as error:
            # a configuration error: stored and reported once, never retried on a timer
            await self._failed(runner, error, retry=False)
            raise
        except Exception as error:
            await self._failed(runner, error, retry=True)
            raise
        runner.failures = 0
        return meta

    async def _failed(self, runner: _Collection, error: Exception, *, retry: bool) -> None:
        message = error.message if isinstance(error, ChamviError) else f"{type(error).__name__}: {error}"
        if retry:
            runner.failures += 1
        delay = backoff(runner.failures) if retry else None
        meta = await self.index.meta(runner.name)
        if meta is not None:
            meta.error = message
            meta.next_attempt = datetime.now(UTC) + delay if delay is not None else None
            await self.index.save_meta(meta)
        after = f" (next attempt in {int(delay.total_seconds())} s)" if delay is not None else ""
        line = f"knowledge error: collection {runner.name!r}: {message}{after}"
        self._errors.report(
            BackgroundError(line, source="knowledge", cause=error), lambda: log.error("%s", line)
        )

    async def stop(self) -> None:
        """Aborts the passes under way and waits for them, then closes the index if it opened it.

        A pass cut short loses nothing: the next one (here or in an app's worker) resumes the same
        generation. Safe to call again; ``start()`` may follow.
        """
        runners, self._passes = list(self._passes.values()), {}
        self._started = False
        for runner in runners:
            runner.cancellation.set()
            if runner.task is not None:
                runner.task.cancel()
            for waiter in runner.waiting:  # syncs asked for the pass that will not come
                waiter.cancel()
        await asyncio.gather(*(r.task for r in runners if r.task is not None), return_exceptions=True)
        await self._errors.drain()
        if self._owns_index and self._index is not None:
            index, self._index = self._index, None
            await close_index(index)

    async def __aenter__(self) -> Knowledge:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
