"""Activities of the concurrency lock: joining a key's queue and checking a holder is alive."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from chamvi.constants import (
    ACTIVITY_ENQUEUE_LOCK,
    ACTIVITY_RUN_IS_OPEN,
)
from chamvi.models import LockRequest, RunIsOpenRequest
from chamvi.starters import enqueue


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
