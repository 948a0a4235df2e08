"""The ``AgentRegistry`` workflow: put, remove or read agents defined at runtime, on a worker.

A process without the App (``chamvi agents put``, your own ``ChamviClient``) cannot check a
definition against the App's runtime tools and models, so it asks a worker the way ``chamvi
dispatch`` checks an agent: a short workflow whose one local activity does the work on the worker's
runtime (``chamvi.dynamic_agents``). Its history keeps who put what, and when.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.models.agents import AgentRegistryRequest, AgentRegistryResult
    from chamvi.retry import AGENT_REGISTRY_FAILURES, non_retryable


@workflow.defn(name=c.AGENT_REGISTRY_WORKFLOW)
class AgentRegistryWorkflow:
    """A short workflow per put, remove, read or listing of runtime agents from outside a worker."""

    @workflow.run
    async def run(self, request: AgentRegistryRequest) -> AgentRegistryResult:
        """What the worker answered; fails with its error (``validation_error`` with its issues, ...)."""
        result: AgentRegistryResult = await workflow.execute_local_activity(
            c.ACTIVITY_AGENT_REGISTRY,
            request,
            result_type=AgentRegistryResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                maximum_attempts=3, non_retryable_error_types=non_retryable(AGENT_REGISTRY_FAILURES)
            ),
        )
        return result
