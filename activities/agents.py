"""Reading an agent's definition out of the app, for a workflow that never imports the app."""

from __future__ import annotations

from temporalio import activity

from chamvi.app_runtime import AppRuntime
from chamvi.constants import ACTIVITY_DESCRIBE_AGENT
from chamvi.models import AgentSpec, DescribeAgentRequest
from chamvi.permissions import PolicyRun


class AgentActivities:
    """Holds the worker's runtime: an agent's spec comes from its App, a run's tools from its factory."""

    def __init__(self, runtime: AppRuntime) -> None:
        self.runtime = runtime

    @activity.defn(name=ACTIVITY_DESCRIBE_AGENT)
    async def describe_agent(self, request: DescribeAgentRequest) -> AgentSpec:
        """The agent's spec; for a run, where this process starts relaying its events.

        A run is described once, at its start, so the process that starts a run relays its events
        to its ``App.on`` listeners, each once.
        """
        run = (
            PolicyRun(request.run_id, request.agent, request.trigger)
            if request.run_id is not None and request.trigger is not None
            else None
        )
        if run is None:
            return self.runtime.app.spec(request.agent)
        spec = self.runtime.spec(request.agent, run)
        self.runtime.events.follow(activity.client(), run.run_id)
        return spec
