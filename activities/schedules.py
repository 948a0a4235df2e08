"""The dispatch of one schedule fire: an ordinary run, keyed by the schedule and the fire time."""

from __future__ import annotations

from temporalio import activity

from chamvi import _constants as c
from chamvi.client import ChamviClient
from chamvi.dynamic_agents import RuntimeAgents
from chamvi.models import ScheduledDispatch, ScheduledRunResult
from chamvi.schedules import scheduled_run_input


class ScheduleActivities:
    """Activities of the ``ChamviScheduledRun`` workflow; the worker's agents say which exist."""

    def __init__(self, agents: RuntimeAgents) -> None:
        self.agents = agents

    @activity.defn(name=c.ACTIVITY_DISPATCH_SCHEDULED)
    async def dispatch_scheduled(self, request: ScheduledDispatch) -> ScheduledRunResult:
        """Starts the fire's run, or finds it when this fire started it before (a retry, a repeat).

        Raises:
            AgentNotFoundError: the app serves no such agent, in code or defined at runtime (a
                runtime schedule naming another app's agent, or one removed): not retried.
        """
        await self.agents.check(request.agent)
        client = ChamviClient(activity.client(), task_queue=activity.info().task_queue)
        result = await client.start(scheduled_run_input(request))
        return ScheduledRunResult(run_id=result.run_id, created=result.created)
