"""Reading an agent's definition out of the app, for a workflow that never imports the app."""

from __future__ import annotations

import logging

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from chamvi.app import App
from chamvi.constants import ACTIVITY_DESCRIBE_AGENT
from chamvi.errors import ChamviError
from chamvi.models import AgentSpec, DescribeAgentRequest

log = logging.getLogger("chamvi.runs")


class AgentActivities:
    def __init__(self, app: App) -> None:
        self.app = app

    @activity.defn(name=ACTIVITY_DESCRIBE_AGENT)
    async def describe_agent(self, request: DescribeAgentRequest) -> AgentSpec:
        try:
            return self.app.spec(request.agent)
        except ChamviError as error:
            # the caller's mistake (an agent this app does not serve), not the worker's: one line
            # here, and BENIGN keeps the SDK from logging the failure again with a traceback
            info = activity.info()
            log.warning("%s %s: %s", info.workflow_type, info.workflow_id, error.message)
            raise ApplicationError(
                error.message,
                type=error.code,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            ) from None
