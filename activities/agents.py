"""Reading an agent's definition out of the app, for a workflow that never imports the app."""

from __future__ import annotations

from temporalio import activity

from chamvi.app import App
from chamvi.constants import ACTIVITY_DESCRIBE_AGENT
from chamvi.models import AgentSpec, DescribeAgentRequest


class AgentActivities:
    def __init__(self, app: App) -> None:
        self.app = app

    @activity.defn(name=ACTIVITY_DESCRIBE_AGENT)
    async def describe_agent(self, request: DescribeAgentRequest) -> AgentSpec:
        return self.app.spec(request.agent)
