"""What a worker does around its run: open the knowledge index, check it, start collections, close it.

``ChamviPlugin`` runs these for every worker (``chamvi worker``, ``chamvi dev``, ``worker.py``, a
user's own worker, the tests). Starting never embeds, only asks: it refuses a declared name the index
holds as a managed collection, marks collections the code no longer declares ``orphaned`` (kept,
searchable by no agent), asks every collection for a pass (the pass itself runs in the background,
in the collection's workflow) with the collection's ``resync``: the workflow reads the sources again
that long after its last successful pass, once however many workers run. Each worker's request is a
start request, so its own first attempt skips a backoff under way. The Temporal Schedules that asked
for resyncs before (a fixed clock) are deleted as the collections start.

A collection's workflow keeps the task queue it started on. When it runs on another queue than this
worker's, no pass of it runs here: where no worker polls that queue it is moved here (the README's
procedure: end the workflow, start it again on this queue); where workers do poll it, it is theirs,
and the worker says in one line how to move it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import shutil
import tempfile

from qdrant_client import AsyncQdrantClient
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi._on_error import ErrorHook
from chamvi._starters import request_sync
from chamvi.app import App
from chamvi.errors import BackgroundError, ChamviError, IndexUnavailableError, InvalidAppError
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.models.knowledge import CollectionStatus, SyncSignal
from chamvi.settings import Settings
from chamvi.vectors import StoreBusyError
from chamvi.vectors.client import ClientStore
from chamvi.vectors.edge import EdgeStore
from chamvi.vectors.migrate import is_local_mode_folder, migrate_local_folder

log = logging.getLogger(__name__)


# qdrant-client's local mode locks its folder; a second client raises RuntimeError with this text
_QDRANT_FOLDER_TAKEN = "already accessed by another instance"
EDGE_FOLDER = "qdrant-edge"
"""The embedded default's folder under the data folder: Qdrant Edge shards (``chamvi.vectors.edge``)."""
LOCAL_MODE_FOLDER = "qdrant"
"""Where earlier versions kept qdrant-client's local mode; carried over to Qdrant Edge on first start."""


def index_location(settings: Settings) -> str:
    """Where the knowledge index lives, for messages: the Qdrant URL or the local folder."""
    return settings.qdrant_url or str(settings.data / EDGE_FOLDER)


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split()) or 'no detail'}"


def open_index(settings: Settings) -> KnowledgeIndex:
    """The knowledge index: the Qdrant server at ``QDRANT_URL``, else Qdrant Edge in ``DATA/qdrant-edge``.

    The embedded store allows one process per folder: the worker (and, in ``chamvi dev``, the API)
    own it. A ``DATA/qdrant`` folder that an earlier version wrote in qdrant-client's local mode is
    carried over first (``chamvi.vectors.migrate``), once.

    Raises:
        IndexUnavailableError: another process holds the folder, or the index cannot be opened at all.
    """
    location = index_location(settings)
    try:
        if settings.qdrant_url:
            return KnowledgeIndex(
                ClientStore(AsyncQdrantClient(url=settings.qdrant_url)), prefix=settings.qdrant_prefix
            )
        root = settings.data / EDGE_FOLDER
        legacy = settings.data / LOCAL_MODE_FOLDER
        if not root.exists() and is_local_mode_folder(legacy):
            location = str(legacy)  # an earlier version's process may hold it
            migrate_local_folder(legacy, root)
            location = str(root)
        return KnowledgeIndex(EdgeStore(root), prefix=settings.qdrant_prefix)
    except Exception as error:
        raise _unavailable(error, location) from None


def legacy_index(settings: Settings) -> KnowledgeIndex:
    """The local-mode folder an earlier version wrote, opened as it is (read-only use: ``chamvi check``).

    Raises:
        IndexUnavailableError: another process holds the folder.
    """
    folder = settings.data / LOCAL_MODE_FOLDER
    try:
        client = AsyncQdrantClient(path=str(folder))
    except Exception as error:
        raise _unavailable(error, str(folder)) from None
    return KnowledgeIndex(ClientStore(client), prefix=settings.qdrant_prefix)


def _unavailable(error: BaseException, location: str) -> IndexUnavailableError:
    if isinstance(error, StoreBusyError) or _QDRANT_FOLDER_TAKEN in str(error):
        return IndexUnavailableError(
            f"another process (a `chamvi dev` or `chamvi worker`) uses the Qdrant folder {location}: "
            "stop it, pass another --data, or set QDRANT_URL to a Qdrant server to run several processes"
        )
    return IndexUnavailableError(f"cannot open the knowledge store at {location}: {_one_line(error)}")


def memory_index() -> KnowledgeIndex:
    """A throwaway index for apps without collections, tests and benchmarks (``:memory:``).

    Qdrant Edge has no in-memory mode: this is an Edge store in a temporary folder, deleted when the
    index is closed or the process exits, so tests run the embedded default's own engine.
    """
    folder = tempfile.mkdtemp(prefix="chamvi-edge-")
    atexit.register(shutil.rmtree, folder, True)
    return KnowledgeIndex(EdgeStore(folder, temporary=True))


async def close_index(index: KnowledgeIndex) -> None:
    """Closes the index's store; a failing close must not hide why the worker stops."""
    with contextlib.suppress(Exception):
        await index.vectors.close()


async def check_index(app: App, index: KnowledgeIndex, location: str = "the knowledge store") -> None:
    """Fails the boot, before the worker polls, on an index the app cannot run against.

    That is a declared name the index holds as a managed collection, or an index that does not
    answer.

    Raises:
        InvalidAppError: a declared collection's name is taken by a managed one.
        IndexUnavailableError: the index cannot be read (a Qdrant server that is down or refuses).
    """
    try:
        metas = await index.all_meta()
    except Exception as error:
        raise IndexUnavailableError(
            f"cannot read the knowledge store at {location}: {_one_line(error)}"
        ) from None
    for meta in metas:
        if meta.name in app.collections and meta.kind == "managed":
            raise InvalidAppError(
                f"collection {meta.name!r} is declared in the code but exists as a managed collection: "
                "rename one of them"
            )


async def start_collections(client: Client, app: App, store: KnowledgeIndex, task_queue: str) -> set[str]:
    """Asks every collection for a pass, marks undeclared ones orphaned, keeps the resync schedules.

    Returns:
        The names left on another task queue, where workers poll (their passes run there, not here).
    """
    elsewhere: set[str] = set()
    for meta in await store.all_meta():
        if meta.kind == "managed":
            if not await _bound_here(client, meta.name, task_queue):
                elsewhere.add(meta.name)
                continue
            try:  # embeds whatever was left pending
                await request_sync(client, task_queue, meta.name, start=SyncSignal(start=True))
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
        if await _bound_here(client, collection.name, task_queue):
            start = SyncSignal(start=True, resync=collection.resync)
            await request_sync(client, task_queue, collection.name, start=start)
        else:
            elsewhere.add(collection.name)
        await _delete_schedule(client, collection.name)  # a fixed clock's, from before the workflow's timer
    return elsewhere


async def _bound_here(client: Client, name: str, task_queue: str) -> bool:
    """Whether the passes of ``name`` can run on ``task_queue``, moving its workflow here if safe.

    Moving is safe when no worker has polled the old queue lately (the server remembers pollers for
    a few minutes): nothing can be running a pass there, and the collection's state lives in the
    store, so a workflow started afresh here loses nothing and re-embeds nothing. Where workers do
    poll, they may be mid-pass, or serve another app that shares the namespace: the collection stays.
    """
    workflow_id = c.KNOWLEDGE_ID_PREFIX + name
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return True
        raise
    if described.status != WorkflowExecutionStatus.RUNNING or described.task_queue == task_queue:
        return True
    old = described.task_queue
    if await _polled(client, old):
        log.warning(
            "knowledge %r runs on task queue %r, where other workers poll, not on %r: its passes run "
            "there; to move it here, stop those workers, run `temporal workflow terminate --workflow-id "
            "%s`, and restart this worker",
            name,
            old,
            task_queue,
            workflow_id,
        )
        return False
    try:
        # this run only: a worker booting beside this one may have moved it already
        await client.get_workflow_handle(workflow_id, run_id=described.run_id).terminate(
            f"moved to task queue {task_queue!r}: no worker polls {old!r}"
        )
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
    log.warning("knowledge %r: moved from task queue %r, where no worker polls, to %r", name, old, task_queue)
    return True


async def _polled(client: Client, task_queue: str) -> bool:
    """Whether a worker polled ``task_queue`` (for workflow or activity tasks) in the last minutes."""
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=kind
            )
        )
        if described.pollers:
            return True
    return False


async def _delete_schedule(client: Client, name: str) -> None:
    try:
        await client.get_schedule_handle(c.KNOWLEDGE_SCHEDULE_PREFIX + name).delete()
    except RPCError as error:
        # a server without schedules (the time-skipping test server) holds none to delete
        if error.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.UNIMPLEMENTED):
            raise


async def boot_collections(
    client: Client, app: App, index: KnowledgeIndex, task_queue: str, errors: ErrorHook | None = None
) -> None:
    """:func:`start_collections` in the background of a worker: reports a failure, never raises.

    The failure goes to the app's ``on_error`` (``errors``), else to the log. It names only the
    collections whose pass runs on this worker's task queue: a collection bound to another queue
    where workers poll has had its own warning.
    """
    try:
        elsewhere = await start_collections(client, app, index, task_queue)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        message = error.message if isinstance(error, ChamviError) else f"{type(error).__name__}: {error}"
        line = (
            f"knowledge error: starting the collections failed: {message} (the worker goes on; "
            "`chamvi knowledge sync NAME` asks a collection for a pass)"
        )
        (errors or ErrorHook()).report(
            BackgroundError(line, source="collections", cause=error), lambda: log.error("%s", line)
        )
        return
    here = [name for name in app.collections if name not in elsewhere]
    if here:
        names = ", ".join(here)
        log.info("knowledge: a pass over %s runs in the background (`chamvi knowledge list` shows it)", names)
