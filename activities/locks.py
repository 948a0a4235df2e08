"""Activities of the concurrency lock: joining a key's queue and checking a holder is alive."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from chamvi._constants import (
    ACTIVITY_ENQUEUE_LOCK,
    ACTIVITY_RUN_IS_OPEN,
)
from chamvi._starters import enqueue
from chamvi.models import LockRequest, RunIsOpenRequest


class LockActivities:
    """Client calls the concurrency lock needs, which a workflow cannot make itself."""

    @activity.defn(name=ACTIVITY_ENQUEUE_LOCK)
    async def enqueue_lock(self, request: LockRequest) -> None:
        """Joins the key's queue, starting its lock workflow if none runs (signal-with-start)."""
        await enqueue(activity.client(), activity.info().task_queue, request)

    @activity.defn(name=ACTIVITY_RUN_IS_OPEN)
    async def run_is_open(self, request: RunIsOpenRequest) -> bool:
        """Whether the key's holder still runs: one that vanished (terminated, reset) frees the key."""
        try:
            description = await activity.client().get_workflow_handle(request.run_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return description.status == WorkflowExecutionStatus.RUNNING
