"""Starting and signalling chamvi's own helper workflows, from any client.

Client-side Temporal calls, shared by the client, the CLI, the HTTP API, the worker's boot and the
activities that make the same request from inside a workflow (through ``activity.client()``): a run
joining its concurrency key's queue, a collection asked for a pass.
"""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi.models import CollectionInput, LockRequest, LockState, SyncSignal


async def enqueue(client: Client, task_queue: str, request: LockRequest) -> None:
    """Joins ``request.run_id`` to the key's queue, starting the lock workflow if it is idle."""
    await client.start_workflow(
        c.CONCURRENCY_LOCK_WORKFLOW,
        LockState(key=request.key),
        id=c.LOCK_ID_PREFIX + request.key,
        task_queue=task_queue,
        start_signal=c.SIGNAL_LOCK_ACQUIRE,
        start_signal_args=[request.run_id],
    )


async def request_sync(client: Client, task_queue: str, name: str, start: SyncSignal | None = None) -> bool:
    """Asks ``knowledge:<name>`` for a pass, starting the workflow if it is not running.

    A pass that is owed and has not begun reads whatever was stored before it begins, so when the
    workflow's memo says one is queued the request is already met: it returns False and adds no
    signal (Temporal refuses a run's 10 001st). Returns True when it signalled.

    ``start`` is a worker's request as it starts: always sent, since it also ends a backoff under way
    (that worker's own first attempt) and declares the collection's ``resync``.
    """
    if start is None and await _pass_queued(client, name):
        return False
    await client.start_workflow(
        c.KNOWLEDGE_COLLECTION_WORKFLOW,
        CollectionInput(name=name, sync=False),
        id=c.KNOWLEDGE_ID_PREFIX + name,
        task_queue=task_queue,
        start_signal=c.SIGNAL_KNOWLEDGE_SYNC,
        start_signal_args=[start] if start is not None else [],
    )
    return True


async def _pass_queued(client: Client, name: str) -> bool:
    try:
        described = await client.get_workflow_handle(c.KNOWLEDGE_ID_PREFIX + name).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return False
    return bool(await described.memo_value(c.MEMO_KNOWLEDGE_QUEUED, False))
