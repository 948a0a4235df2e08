"""Client calls of the concurrency lock: joining a key's queue and checking a holder is alive."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from chamvi.constants import (
    ACTIVITY_ENQUEUE_LOCK,
    ACTIVITY_RUN_IS_OPEN,
    CONCURRENCY_LOCK_WORKFLOW,
    LOCK_ID_PREFIX,
    SIGNAL_LOCK_ACQUIRE,
)
from chamvi.models import LockRequest, LockState, RunIsOpenRequest


async def enqueue(client: Client, task_queue: str, request: LockRequest) -> None:
    """Joins ``request.run_id`` to the key's queue, starting the lock workflow if it is idle."""
    await client.start_workflow(
        CONCURRENCY_LOCK_WORKFLOW,
        LockState(key=request.key),
        id=LOCK_ID_PREFIX + request.key,
        task_queue=task_queue,
        start_signal=SIGNAL_LOCK_ACQUIRE,
        start_signal_args=[request.run_id],
    )


class LockActivities:
    @activity.defn(name=ACTIVITY_ENQUEUE_LOCK)
    async def enqueue_lock(self, request: LockRequest) -> None:
        await enqueue(activity.client(), activity.info().task_queue, request)

    @activity.defn(name=ACTIVITY_RUN_IS_OPEN)
    async def run_is_open(self, request: RunIsOpenRequest) -> bool:
        try:
            description = await activity.client().get_workflow_handle(request.run_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return description.status == WorkflowExecutionStatus.RUNNING
