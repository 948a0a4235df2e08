"""Reading an agent's definition out of the app, for a workflow that never imports the app."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from chamvi.app import App
from chamvi.constants import ACTIVITY_DESCRIBE_AGENT
from chamvi.errors import ChamviError
from chamvi.models import AgentSpec, DescribeAgentRequest


class AgentActivities:
    def __init__(self, app: App) -> None:
        self.app = app

    @activity.defn(name=ACTIVITY_DESCRIBE_AGENT)
    async def describe_agent(self, request: DescribeAgentRequest) -> AgentSpec:
        try:
            return self.app.spec(request.agent)
        except ChamviError as error:
            raise ApplicationError(error.message, type=error.code, non_retryable=True) from None
