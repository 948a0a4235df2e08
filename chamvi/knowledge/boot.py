"""What a worker does for knowledge when it starts: never embeds, only asks.

It refuses a declared name the store holds as a managed collection, marks collections the code no
longer declares ``orphaned`` (kept, searchable by no agent), asks every declared collection for a
pass (the pass itself runs in the background, in the collection's workflow), and keeps one
Temporal Schedule per collection with a ``resync``, so the sources are read once per interval
however many workers run.
"""

from __future__ import annotations

import logging

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.knowledge import request_sync
from chamvi import constants as c
from chamvi.app import App
from chamvi.errors import InvalidAppError
from chamvi.knowledge.collections import KnowledgeCollection
from chamvi.knowledge.state import CollectionStatus, SyncRequest
from chamvi.knowledge.store import KnowledgeStore

log = logging.getLogger("chamvi.knowledge")


async def check_store(app: App, store: KnowledgeStore) -> None:
    """Fails the boot for a declared name that the store holds as a managed collection."""
    for meta in await store.all_meta():
        if meta.name in app.collections and meta.kind == "managed":
            raise InvalidAppError(
                f"collection {meta.name!r} is declared in the code but exists as a managed collection: "
                "rename one of them"
            )


async def start_knowledge(client: Client, app: App, store: KnowledgeStore, task_queue: str) -> None:
    await check_store(app, store)
    for meta in await store.all_meta():
        if meta.kind == "managed":
            try:
                await request_sync(client, task_queue, meta.name)  # embeds whatever was left pending
            except RPCError as error:
                if error.status != RPCStatusCode.INVALID_ARGUMENT:
                    raise
                # the run refuses more signals (Temporal's 10 000 per run): it has a pass pending
                # already, and continues as new after it
                log.warning("knowledge %r: sync request refused: %s", meta.name, error.message)
            continue
        if meta.name not in app.collections and meta.kind == "declared":
            if meta.status != CollectionStatus.ORPHANED:
                meta.status = CollectionStatus.ORPHANED
                await store.save_meta(meta)
                log.warning(
                    "knowledge %r is no longer declared: kept as orphaned, searchable by no agent", meta.name
                )
            await _delete_schedule(client, meta.name)
    for collection in app.collections.values():
        await request_sync(client, task_queue, collection.name)
        await ensure_schedule(client, task_queue, collection)


def _schedule(collection: KnowledgeCollection, task_queue: str) -> Schedule:
    assert collection.resync is not None
    return Schedule(
        action=ScheduleActionStartWorkflow(
            c.KNOWLEDGE_SYNC_REQUEST_WORKFLOW,
            SyncRequest(name=collection.name),
            id=f"knowledge-sync-request:{collection.name}",
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=collection.resync)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_schedule(client: Client, task_queue: str, collection: KnowledgeCollection) -> None:
    if collection.resync is None:
        await _delete_schedule(client, collection.name)
        return
    schedule = _schedule(collection, task_queue)
    schedule_id = c.KNOWLEDGE_SCHEDULE_PREFIX + collection.name
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def update(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(update)


async def _delete_schedule(client: Client, name: str) -> None:
    try:
        await client.get_schedule_handle(c.KNOWLEDGE_SCHEDULE_PREFIX + name).delete()
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
