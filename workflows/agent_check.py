"""The ``AgentCheck`` workflow: does the worker's app serve this agent?

``chamvi dispatch`` does not load the app, so it asks a worker before it starts a run: an unknown
agent then fails at once, with the message the HTTP API gives, instead of a run that fails a moment
later. The answer comes from the same ``describe_agent`` activity a run starts with.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.models import AgentSpec, DescribeAgentRequest
    from chamvi.retry import DISPATCH_CHECK_FAILURES, non_retryable


@workflow.defn(name=c.AGENT_CHECK_WORKFLOW)
class AgentCheckWorkflow:
    """A short workflow ``chamvi dispatch`` starts to ask a worker whether its app serves an agent."""

    @workflow.run
    async def run(self, request: DescribeAgentRequest) -> None:
        """Completes when the app serves ``request.agent``; fails with the app's error otherwise.

        With ``request.model_settings`` (a dispatch's own), it fails too when the agent does not let
        a dispatch set them.
        """
        await workflow.execute_local_activity(
            c.ACTIVITY_DESCRIBE_AGENT,
            request,
            result_type=AgentSpec,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(
                maximum_attempts=3, non_retryable_error_types=non_retryable(DISPATCH_CHECK_FAILURES)
            ),
        )
