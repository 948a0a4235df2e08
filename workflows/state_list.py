"""The ``AgentStateList`` workflow: a page of an agent's state, read by the worker that holds Qdrant.

In the embedded default Qdrant runs in local mode inside the worker's process, which allows no
other reader, so ``chamvi state list`` asks a worker the way ``chamvi dispatch`` checks an agent:
a short workflow whose one local activity reads the page.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.errors import NotFoundError
    from chamvi.models import StateListing, StateListRequest
    from chamvi.retry import AGENT_LOOKUP_FAILURES, non_retryable


@workflow.defn(name=c.AGENT_STATE_LIST_WORKFLOW)
class AgentStateListWorkflow:
    """A short workflow ``chamvi state list`` starts, so that the worker holding Qdrant reads the page."""

    @workflow.run
    async def run(self, request: StateListRequest) -> StateListing:
        """The page; fails with the app's error for an unknown agent or collection."""
        listing: StateListing = await workflow.execute_local_activity(
            c.ACTIVITY_STATE_LIST,
            request,
            result_type=StateListing,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                maximum_attempts=3,
                non_retryable_error_types=non_retryable((*AGENT_LOOKUP_FAILURES, NotFoundError)),
            ),
        )
        return listing
