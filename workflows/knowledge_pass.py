"""One indexing pass as a workflow of its own, a child of its collection's workflow.

``KnowledgeCollection`` starts one ``KnowledgePass`` per pass, with the id
``knowledge-pass:<name>:<chain>:<n>``: the collection's name, the first 8 characters of the first run
id of the collection workflow's chain (it stays the same as the workflow continues as new, and a
collection deleted and created again gets a new one, so an id never names two passes), and the pass's
number in that chain, from 1. The Temporal UI and ``temporal workflow list`` list each pass with its
status, its summary, its counts (the result and the memo ``stats``) and its failure; its one
activity, ``chamvi.knowledge_pass``, heartbeats the counts while it runs.

The collection's workflow keeps every rule of its own (one pass at a time, one more pass for the
requests made during one, the backoff, the resync timer): this workflow only runs the activity once and
turns its failure into the workflow's, with the message and type the collection stores.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.models.knowledge import CollectionMeta, PassRequest, PassResult, PassStats
    from chamvi.retry import PASS_HEARTBEAT_TIMEOUT

# one attempt per activity: the collection's workflow owns the backoff so its state shows the error
# and the time of the next attempt; a timer holds across workers and restarts
PASS_ATTEMPTS = RetryPolicy(maximum_attempts=1)
PASS_TIMEOUT = timedelta(hours=24)


def pass_workflow_id(name: str, chain: str, number: int) -> str:
    """The id of a collection's ``number``-th pass workflow in the chain whose first run is ``chain``."""
    return f"{c.KNOWLEDGE_PASS_ID_PREFIX}{name}:{chain[:8]}:{number}"


async def pass_activity(request: PassRequest) -> CollectionMeta:
    """The pass activity, as this workflow runs it (and the collection's workflow did before)."""
    meta: CollectionMeta = await workflow.execute_activity(
        c.ACTIVITY_KNOWLEDGE_PASS,
        request,
        result_type=CollectionMeta,
        start_to_close_timeout=PASS_TIMEOUT,
        heartbeat_timeout=PASS_HEARTBEAT_TIMEOUT,
        retry_policy=PASS_ATTEMPTS,
        summary=f"pass over {request.name}",
    )
    return meta


def pass_failure(error: ActivityError | ChildWorkflowError) -> tuple[str, str | None]:
    """A failed pass's message and error type, from the activity's failure or the pass workflow's.

    The type is None for a timeout (a killed worker's pass) or a cancellation.
    """
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return cause.message, cause.type
    return str(cause or error), None


@workflow.defn(name=c.KNOWLEDGE_PASS_WORKFLOW)
class KnowledgePassWorkflow:
    """One pass over one collection (``knowledge-pass:<name>:<chain>:<n>``), its counts as its result."""

    @workflow.run
    async def run(self, request: PassRequest) -> PassResult:
        """Runs the pass activity once; its failure fails this workflow with the same message and type."""
        try:
            meta = await pass_activity(request)
        except ActivityError as error:
            message, kind = pass_failure(error)
            raise ApplicationError(message, type=kind, non_retryable=True) from error
        stats = meta.last_stats or PassStats()
        workflow.upsert_memo(
            {
                c.MEMO_KNOWLEDGE_PASS_STATS: stats.model_dump(mode="json"),
                c.MEMO_KNOWLEDGE_PASS_GENERATION: meta.generation,
            }
        )
        workflow.set_current_details(f"{request.name}, generation {meta.generation}: {stats.line()}")
        return PassResult(stats=stats, meta=meta)
