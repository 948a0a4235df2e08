"""The ``ChamviScheduledRun`` workflow: one fire of an agent schedule.

An agent schedule's Temporal Schedule starts it at each fire (see ``chamvi.schedules``). It dispatches
one ordinary run keyed by the schedule id and the fire's nominal time, so a repeated fire finds the
run the first one started; then, unless the overlap policy is ``allow_all``, it waits for that run to
end, so the Schedule's overlap policy (skip a fire while the last run goes on, buffer it) is about runs.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.errors import AgentNotFoundError, InvalidInputError
    from chamvi.models import (
        RunView,
        RunWaitRequest,
        ScheduledDispatch,
        ScheduledRunInput,
        ScheduledRunResult,
    )
    from chamvi.retry import non_retryable

DISPATCH_TIMEOUT = timedelta(seconds=30)
RUN_WAIT_HEARTBEAT = timedelta(seconds=30)


@workflow.defn(name=c.SCHEDULED_RUN_WORKFLOW)
class ScheduledRunWorkflow:
    """One fire of an agent schedule: dispatches its run, and waits for it unless overlaps are allowed."""

    @workflow.run
    async def run(self, request: ScheduledRunInput) -> ScheduledRunResult:
        """Dispatches the fire's run (once, however often the fire repeats) and waits for its end."""
        info = workflow.info()
        # a fire started by hand (`temporal workflow start`) has no nominal time: its own start is one
        fire_time = info.typed_search_attributes.get(c.SA_SCHEDULED_START_TIME) or info.start_time
        dispatched: ScheduledRunResult = await workflow.execute_activity(
            c.ACTIVITY_DISPATCH_SCHEDULED,
            ScheduledDispatch(
                schedule_id=request.schedule_id,
                agent=request.agent,
                payload=request.payload,
                fire_time=fire_time,
            ),
            result_type=ScheduledRunResult,
            start_to_close_timeout=DISPATCH_TIMEOUT,
            retry_policy=RetryPolicy(
                non_retryable_error_types=non_retryable((AgentNotFoundError, InvalidInputError))
            ),
            summary=f"dispatch {request.agent}",
        )
        if request.overlap == "allow_all":
            return dispatched
        outcome: RunView = await workflow.execute_activity(
            c.ACTIVITY_WAIT_FOR_RUN,
            RunWaitRequest(run_id=dispatched.run_id, key=f"schedule:{request.schedule_id}"),
            result_type=RunView,
            start_to_close_timeout=c.RUN_WAIT_TIMEOUT,
            heartbeat_timeout=RUN_WAIT_HEARTBEAT,
            summary=f"wait for {dispatched.run_id}",
        )
        return dispatched.model_copy(update={"status": outcome.status})
