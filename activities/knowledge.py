"""Knowledge activities: a pass over a collection, a sync request, a search from outside a run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from chamvi import _constants as c
from chamvi._starters import request_sync
from chamvi.app import App
from chamvi.errors import (
    BackgroundError,
    ChamviError,
    InvalidAgentDefinitionError,
    InvalidAppError,
    KnowledgePassError,
)
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.models.knowledge import (
    CollectionMeta,
    CollectionStatus,
    PassRequest,
    PassStats,
    SearchRequest,
    SyncRequest,
)
from chamvi.retry import PASS_HEARTBEAT_INTERVAL

log = logging.getLogger(__name__)


class KnowledgeActivities:
    """Holds the Qdrant index, the indexer and the searcher the worker opened, for every pass and search."""

    def __init__(self, app: App, store: KnowledgeIndex, indexer: Indexer, search: KnowledgeSearch) -> None:
        self.app = app
        self.store = store
        self.indexer = indexer
        self.searcher = search

    @activity.defn(name=c.ACTIVITY_KNOWLEDGE_PASS)
    async def knowledge_pass(self, request: PassRequest) -> CollectionMeta:
        """One indexing pass of a collection: reads its sources, embeds what changed, switches generations.

        It heartbeats its counts, so a killed worker's pass is noticed within the heartbeat timeout and
        its progress shows in the Temporal UI; a collection the app no longer declares is retired.
        """
        collection = self.app.collections.get(request.name)
        if collection is None:
            meta = await self.store.meta(request.name)
            if meta is None or meta.kind != "managed":
                return await self._orphan(request.name)
        latest = PassStats()

        def progress(stats: PassStats) -> None:
            nonlocal latest
            latest = stats

        heartbeat = asyncio.create_task(self._heartbeat(lambda: latest))
        try:
            if collection is None:
                meta = await self.indexer.run_managed_pass(request.name, progress) or CollectionMeta(
                    name=request.name
                )
            else:
                meta = await self.indexer.run_pass(collection, progress)
        except (InvalidAgentDefinitionError, InvalidAppError) as error:
            await self._record_error(request.name, error.message, next_attempt=None)
            raise
        except Exception as error:
            message = error.message if isinstance(error, ChamviError) else f"{type(error).__name__}: {error}"
            delay = request.retry_in  # the collection workflow decides the backoff, the pass stores it
            next_attempt = None if delay is None else datetime.now(UTC) + delay
            await self._record_error(request.name, message, next_attempt=next_attempt)
            # a background pass has no caller to throw to: the app's on_error hears of it, else the log
            line = f"knowledge error: collection {request.name!r}: {message}"
            if delay is not None:
                line += f" (next attempt in {int(delay.total_seconds())} s)"
            self.app.errors.report(
                BackgroundError(line, source="knowledge", cause=error), lambda: log.error("%s", line)
            )
            if isinstance(error, ChamviError):
                error.reported = True
                raise
            failure = KnowledgePassError(message)
            failure.reported = True
            raise failure from error
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        stats = meta.last_stats or PassStats()
        log.info(
            "knowledge %r: pass done: %d read, %d unchanged, %d embedded (%d passages), "
            "%d deleted, %d failed",
            request.name,
            stats.read,
            stats.unchanged,
            stats.embedded,
            stats.passages,
            stats.deleted,
            stats.failed,
        )
        return meta

    async def _orphan(self, name: str) -> CollectionMeta:
        meta = await self.store.meta(name)
        if meta is None:
            return CollectionMeta(name=name)  # deleted, or never indexed: nothing to mark
        if meta.kind == "declared" and meta.status != CollectionStatus.ORPHANED:
            meta.status = CollectionStatus.ORPHANED
            await self.store.save_meta(meta)
        return meta

    async def _record_error(self, name: str, message: str, next_attempt: datetime | None) -> None:
        meta = await self.store.meta(name)
        if meta is not None:
            meta.error = message
            meta.next_attempt = next_attempt
            await self.store.save_meta(meta)

    @staticmethod
    async def _heartbeat(latest: Any) -> None:
        """Reports the pass's counts while it runs (visible in the Temporal UI as heartbeat details)."""
        while True:
            activity.heartbeat(latest().model_dump())
            await asyncio.sleep(PASS_HEARTBEAT_INTERVAL.total_seconds())

    @activity.defn(name=c.ACTIVITY_KNOWLEDGE_REQUEST_SYNC)
    async def knowledge_request_sync(self, request: SyncRequest) -> None:
        """Asks a collection's workflow for a pass: an activity, since a workflow cannot signal-with-start."""
        await request_sync(activity.client(), activity.info().task_queue, request.name)

    @activity.defn(name=c.ACTIVITY_KNOWLEDGE_SEARCH)
    async def knowledge_search(self, request: SearchRequest) -> dict[str, Any]:
        """A search of collections, on the worker that holds Qdrant (local mode allows no other reader)."""
        result = await self.searcher.search(
            request.collections, request.query, top_k=request.top_k, min_score=request.min_score
        )
        return result.model_dump(mode="json", exclude_none=True)
