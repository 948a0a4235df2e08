"""Knowledge collections on Temporal: one long-lived workflow per collection runs passes one at a time.

``knowledge:<name>`` waits for a sync request (at boot, from its resync Schedule, from ``chamvi
knowledge sync`` or the API), runs one pass as a child workflow (``KnowledgePass``, see
``knowledge_pass``), and keeps the result for queries.
Requests that arrive during a pass set one flag: exactly one more pass follows, never a parallel
one. The flag is also the workflow's memo ``queued``, which a requester reads first: while it is set
a request adds nothing, so a stream of PUTs during a long pass or a backoff costs a signal or two,
not one each (a run takes at most 10 000 signals). A failed pass is retried after 5 s doubling to
5 min, a timer that holds across workers and restarts; a worker's own first request after it starts
(the ``sync`` signal with ``start``) skips a backoff under way, so each replica makes one attempt of
its own and the others wait for the shared backoff. Only counts travel through history, never
documents.

A collection with a ``resync`` (declared by the app, told by each worker's start request) is read
again that long after its last successful pass, by a timer of this workflow: a pass asked for in
between (a sync, a boot) moves the next one along, which a fixed clock would not. Runs recorded
before either rule carry no ``start`` request, so they replay unchanged; the new timers sit behind
patches all the same.

``chamvi knowledge search`` asks the collection's workflow itself, through the update ``search``,
which runs the search as an activity on the worker that holds Qdrant. A workflow per search (what
``KnowledgeSearch`` was) left one finished workflow in the Temporal UI's list per search; an update
leaves none, needs no id of its own, reaches the queue that serves the collection, and fails at once
for a collection that does not run. Adding an update handler changes no recorded history, so runs
saved before it replay unchanged; each search adds its events and its result to the collection's
history, so the run starts afresh after ``SEARCHES_BEFORE_CONTINUE_AS_NEW`` of them.

Passes became child workflows behind the patch ``knowledge-pass-workflow``: a recorded pass replays as
the activity it was. Since ``patched`` answers once per run, a run that made a pass as an activity
would go on making them until it continues as new; it continues as new before its first live pass
instead (``knowledge-pass-workflow-move-<n>``), so an older collection moves over at its next pass,
with its generation, backoff and resync in the new run's input.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from .knowledge_pass import pass_activity, pass_failure, pass_workflow_id

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.errors import ChamviValidationError
    from chamvi.models.knowledge import (
        CollectionInput,
        CollectionMeta,
        CollectionState,
        PassRequest,
        PassResult,
        SearchRequest,
        SyncRequest,
        SyncSignal,
    )
    from chamvi.retry import SEARCH_FAILURES, backoff, non_retryable

CONFIGURATION_ERRORS = ("invalid_agent_definition", "invalid_app")
PASSES_BEFORE_CONTINUE_AS_NEW = 100
SYNC_REQUESTS_BEFORE_CONTINUE_AS_NEW = 2_000
"""Temporal refuses a run's 10 001st signal ("exceeded workflow execution limit for signal events") and
every PUT over REST sends one: a run starts afresh long before, however few passes it made."""
SEARCHES_BEFORE_CONTINUE_AS_NEW = 100
"""A search adds about ten events and its result (up to 20 000 characters, twice: the activity's and
the update's) to the history: a hundred stay well under Temporal's history limits."""
SEARCH_RETRIES = RetryPolicy(maximum_attempts=3, non_retryable_error_types=non_retryable(SEARCH_FAILURES))


@workflow.defn(name=c.KNOWLEDGE_COLLECTION_WORKFLOW)
class KnowledgeCollectionWorkflow:
    """One collection (``knowledge:<name>``): its passes one at a time, its status, backoff and resync."""

    def __init__(self) -> None:
        self._requested = False
        self._sync_requests = 0
        self._searches = 0
        self._state = CollectionState(name="")
        self._resync: timedelta | None = None
        self._resync_told = False
        self._backing_off = False
        self._skip_backoff = False

    @workflow.signal(name=c.SIGNAL_KNOWLEDGE_SYNC)
    def sync(self, request: SyncSignal | None = None) -> None:
        """Asks for a pass: one during a pass means exactly one more, never two at once."""
        self._requested = True
        self._sync_requests += 1
        if request is not None and request.start:
            self._resync = request.resync
            self._resync_told = True
            self._state.next_resync = self._next_resync()
            if self._backing_off and workflow.patched(c.PATCH_KNOWLEDGE_START_SKIPS_BACKOFF):
                self._skip_backoff = True
        if not self._state.queued:
            self._set_queued(True)

    def _set_queued(self, queued: bool) -> None:
        self._state.queued = queued
        if workflow.patched(c.PATCH_KNOWLEDGE_QUEUED_MEMO):  # runs recorded before it replay unchanged
            workflow.upsert_memo({c.MEMO_KNOWLEDGE_QUEUED: queued})

    @workflow.query(name=c.QUERY_KNOWLEDGE_STATE)
    def state(self) -> CollectionState:
        """The collection's status, generation and counts, as ``chamvi knowledge list`` shows them."""
        return self._state

    @workflow.update(name=c.UPDATE_KNOWLEDGE_SEARCH)
    async def search(self, request: SearchRequest) -> dict[str, Any]:
        """Searches this collection, beside a pass if one runs (searches read the current generation)."""
        self._searches += 1
        return await _search(request)

    @search.validator
    def _search_this_collection(self, request: SearchRequest) -> None:
        # from the id, not the state: an update may be validated before ``run`` has begun
        workflow_id = workflow.info().workflow_id
        name = workflow_id.removeprefix(c.KNOWLEDGE_ID_PREFIX)
        if request.collections != [name]:
            raise ApplicationError(
                f"the search update of {workflow_id!r} searches {name!r} only, not "
                f"{request.collections!r}: ask each collection's own workflow",
                type=ChamviValidationError.code,
                non_retryable=True,  # a refused update is final; the caller is shown this flag
            )

    def _searches_due(self) -> bool:
        return self._searches >= SEARCHES_BEFORE_CONTINUE_AS_NEW

    @workflow.run
    async def run(self, collection: CollectionInput) -> None:
        """Runs passes as they are asked for, and resyncs on a durable timer, forever (continuing as new)."""
        self._state.name = collection.name
        self._state.meta = collection.meta
        self._requested = self._requested or collection.sync
        self._state.failures = collection.failures
        self._state.last_success = collection.last_success
        if not self._resync_told:  # a start request delivered with the start declared it already
            self._resync = collection.resync
        self._state.next_resync = self._next_resync()
        self._set_queued(self._requested)
        while True:
            await self._wait_for_request()
            if self._requested:
                if self._moves_to_pass_workflows():
                    await self._continue_as_new(collection)
                await self._pass(collection)
            if (
                (self._state.passes >= PASSES_BEFORE_CONTINUE_AS_NEW and not self._requested)
                or self._sync_requests >= SYNC_REQUESTS_BEFORE_CONTINUE_AS_NEW
                or self._searches_due()
            ):
                await self._continue_as_new(collection)

    def _moves_to_pass_workflows(self) -> bool:
        """Whether a run that made its passes as activities starts afresh before its next pass.

        ``patched`` answers once per patch id and run: a run whose history has a pass as an activity
        keeps that answer to its end, so it continues as new (its next run makes pass workflows)
        before the first pass it makes live. The move's patch id names the pass it comes before,
        since a replay asks it before each pass the history made as an activity (and is told False).
        """
        return not workflow.patched(c.PATCH_KNOWLEDGE_PASS_WORKFLOW) and workflow.patched(
            f"{c.PATCH_KNOWLEDGE_PASS_WORKFLOW_MOVE}-{self._state.passes}"
        )

    async def _continue_as_new(self, collection: CollectionInput) -> None:
        if not workflow.all_handlers_finished():  # a search under way answers first
            await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            CollectionInput(
                name=collection.name,
                sync=self._requested,
                meta=self._state.meta,
                failures=self._state.failures,
                resync=self._resync,
                last_success=self._state.last_success,
                pass_count=collection.pass_count + self._state.passes,
            )
        )

    def _next_resync(self) -> datetime | None:
        if self._resync is None or self._state.last_success is None:
            return None
        return self._state.last_success + self._resync

    async def _wait_for_request(self) -> None:
        """Waits for a sync request or searches to hand over; a resync falls due as a request."""
        due = self._state.next_resync
        if due is None or self._requested:
            await workflow.wait_condition(lambda: self._requested or self._searches_due())
            return
        left = due - workflow.now()
        if left > timedelta(0) and workflow.patched(c.PATCH_KNOWLEDGE_RESYNC_TIMER):
            try:
                await workflow.wait_condition(
                    lambda: self._requested or self._searches_due(), timeout=left, timeout_summary="resync"
                )
                return
            except TimeoutError:
                pass
        if not self._requested:
            self._requested = True
            self._set_queued(True)

    async def _pass(self, collection: CollectionInput) -> None:
        """One pass, and on failure the backoff before the next attempt (which stays requested)."""
        name = collection.name
        self._requested = False
        self._set_queued(False)
        self._state.running = True
        retry_in: timedelta | None = None
        # the one decision of the backoff: the pass stores it if it fails, and the workflow waits it
        delay = backoff(self._state.failures + 1)
        request = PassRequest(name=name, failures=self._state.failures, retry_in=delay)
        try:
            if workflow.patched(c.PATCH_KNOWLEDGE_PASS_WORKFLOW):
                number = collection.pass_count + self._state.passes + 1
                self._state.meta = await self._pass_workflow(request, number)
            else:  # as runs recorded before pass workflows made it
                self._state.meta = await pass_activity(request)
            self._state.error = None
            self._state.failures = 0
            self._state.next_attempt = None
            self._state.last_success = workflow.now()
            self._state.next_resync = self._next_resync()
        except (ActivityError, ChildWorkflowError) as error:
            retry_in = self._failed(name, error, delay)
        finally:
            self._state.running = False
            self._state.passes += 1
        if retry_in is not None:
            self._requested = True
            self._set_queued(True)  # the attempt after the backoff reads what arrives meanwhile
            self._backing_off = True
            try:
                # a worker that starts meanwhile makes its own first attempt at once (``sync``)
                await workflow.wait_condition(lambda: self._skip_backoff, timeout=retry_in)
            except TimeoutError:
                pass
            finally:
                self._backing_off = False
                self._skip_backoff = False

    async def _pass_workflow(self, request: PassRequest, number: int) -> CollectionMeta:
        """Runs the pass as the child workflow ``knowledge-pass:<name>:<chain>:<number>``."""
        info = workflow.info()
        pass_id = pass_workflow_id(request.name, info.first_execution_run_id, number)
        self._state.pass_id = pass_id
        result: PassResult = await workflow.execute_child_workflow(
            c.KNOWLEDGE_PASS_WORKFLOW,
            request,
            id=pass_id,
            result_type=PassResult,
            memo={c.MEMO_KNOWLEDGE_PASS_COLLECTION: request.name},
            static_summary=f"pass {number} over {request.name}",
            static_details=(
                f"Indexing pass {number} of knowledge collection `{request.name}`, "
                f"started by `{info.workflow_id}`"
            ),
        )
        return result.meta

    def _failed(
        self, name: str, error: ActivityError | ChildWorkflowError, delay: timedelta
    ) -> timedelta | None:
        """Stores the failure, and says when the next attempt comes.

        After ``delay``, the one the pass request carried (5 s doubling to 5 min per failure in a
        row), or, for a configuration error, with the next sync request (None).
        """
        self._state.error, kind = pass_failure(error)
        if kind in CONFIGURATION_ERRORS:
            self._state.next_attempt = None
            workflow.logger.error("knowledge error: collection %r: %s", name, self._state.error)
            return None
        self._state.failures += 1
        self._state.next_attempt = workflow.now() + delay
        workflow.logger.error(
            "knowledge error: collection %r: %s (next attempt in %d s)",
            name,
            self._state.error,
            delay.total_seconds(),
        )
        return delay


@workflow.defn(name=c.KNOWLEDGE_SYNC_REQUEST_WORKFLOW)
class KnowledgeSyncRequestWorkflow:
    """Started by a collection's resync Schedule: asks the collection for one pass.

    Workers no longer keep such Schedules (the collection's own timer resyncs it) and delete them as
    they start; this stays registered for a Schedule an older worker made, until it is gone.
    """

    @workflow.run
    async def run(self, request: SyncRequest) -> None:
        """Sends the collection its sync request."""
        await workflow.execute_activity(
            c.ACTIVITY_KNOWLEDGE_REQUEST_SYNC, request, start_to_close_timeout=timedelta(seconds=30)
        )


async def _search(request: SearchRequest) -> dict[str, Any]:
    """The search activity, as the collection's ``search`` update and ``KnowledgeSearch`` run it."""
    result: dict[str, Any] = await workflow.execute_activity(
        c.ACTIVITY_KNOWLEDGE_SEARCH,
        request,
        result_type=dict,
        start_to_close_timeout=timedelta(seconds=90),
        retry_policy=SEARCH_RETRIES,
    )
    return result


@workflow.defn(name=c.KNOWLEDGE_SEARCH_WORKFLOW)
class KnowledgeSearchWorkflow:
    """A search from outside a run, a workflow of its own.

    What ``chamvi knowledge search`` started before it asked the collection's workflow (the
    ``search`` update). Kept registered so that saved histories and searches started by an older CLI
    still run.
    """

    @workflow.run
    async def run(self, request: SearchRequest) -> dict[str, Any]:
        """The search's result, as the collection's ``search`` update answers it."""
        return await _search(request)
