"""Dispatching, reading, approving and cancelling runs from any process.

The same operations work with the ``temporal`` CLI (``workflow start --type AgentRun``, ``workflow
update execute --name answer_approval``, ``workflow cancel``); this client adds idempotency and
concurrency keys, clear errors and typed results.

:class:`ChamviClient` is a small core of runs (``dispatch``, ``get_run``, ``wait``, ``cancel``, ...);
the other families of methods are reached as its attributes, as openai-python groups its resources:
``client.conversations``, ``client.approvals``, ``client.schedules``, ``client.agents``,
``client.state``, ``client.knowledge``.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import logging
import re
import uuid
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, TypeVar, cast, overload

from pydantic import ValidationError as PydanticValidationError
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi._idle import wait_idle
from chamvi._names import checked_agent_name, validate_agent_name
from chamvi._run_details import static_details, static_summary
from chamvi._starters import enqueue, request_sync
from chamvi.approval_tokens import (
    NOT_PENDING,
    TOKEN_HOLDER,
    ApprovalClaims,
    ApprovalTokens,
    PendingApproval,
    ResumedApproval,
)
from chamvi.artifacts import ArtifactStore, Attachment, check_media_type
from chamvi.conversations.client import Conversations
from chamvi.errors import (
    ERROR_CLASSES,
    ApprovalNotPendingError,
    ChamviError,
    ChamviValidationError,
    InvalidAgentDefinitionError,
    InvalidInputError,
    InvalidRunStateError,
    RunNotFoundError,
    UnavailableError,
    ValidationIssue,
    validation_issues,
)
from chamvi.models import (
    AgentDefinition,
    AgentInfo,
    AgentPutResult,
    AgentRegistryRequest,
    AgentRegistryResult,
    ApprovalAnswer,
    ApprovalDecision,
    Artifact,
    CallInProgress,
    CollectionState,
    DescribeAgentRequest,
    Invoker,
    LockRequest,
    ModelSettings,
    RunInput,
    RunStatus,
    RunSummary,
    RunView,
    StateListing,
    StateListRequest,
)
from chamvi.run_events import RunEvent
from chamvi.run_history import history_events
from chamvi.schedules import Schedules

T = TypeVar("T")
log = logging.getLogger(__name__)

QUERY_TIMEOUT = timedelta(seconds=5)
AGENT_CHECK_TIMEOUT = timedelta(seconds=3)
"""How long ``client.agents.check`` waits for a worker; a worker that is up answers within milliseconds."""
STATE_LIST_TIMEOUT = timedelta(seconds=10)
"""How long ``client.state.list`` waits for a worker to read a page."""
AGENT_REGISTRY_TIMEOUT = timedelta(seconds=10)
"""How long a put, remove or read of runtime agents waits for a worker."""
FORGET_ATTEMPTS = 5
"""How many times a question's workflow is deleted before it is left to the namespace's retention."""
FORGET_FIRST_PAUSE_SECONDS = 0.2
"""The pause before the second delete; each next one waits twice as long (3 s in all)."""

_TEMPORAL_STATUS = {
    WorkflowExecutionStatus.COMPLETED: RunStatus.COMPLETED,
    WorkflowExecutionStatus.FAILED: RunStatus.FAILED,
    WorkflowExecutionStatus.CANCELED: RunStatus.CANCELLED,
    WorkflowExecutionStatus.TERMINATED: RunStatus.CANCELLED,
    WorkflowExecutionStatus.TIMED_OUT: RunStatus.FAILED,
}


_ERRORS_BY_CODE = {cls.code: cls for cls in ERROR_CLASSES}


class _Moved:
    """An old name of a method that moved to a family, kept working for one release with a warning.

    ``client.send_message`` is ``client.conversations.send`` now: reading the old name warns with a
    ``DeprecationWarning`` that names the new place, and answers the method found there.

    Args:
        path: where the method is now, from the client (``"conversations.send"``).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _Moved: ...

    @overload
    def __get__(self, instance: ChamviClient, owner: type | None = None) -> Callable[..., Any]: ...

    def __get__(
        self, instance: ChamviClient | None, owner: type | None = None
    ) -> _Moved | Callable[..., Any]:
        if instance is None:
            return self
        message = f"ChamviClient.{self.name} is deprecated: use client.{self.path}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        found: Any = instance
        for part in self.path.split("."):
            found = getattr(found, part)
        return cast("Callable[..., Any]", found)


def _worker_cause(error: WorkflowFailureError) -> BaseException | None:
    """Why a short workflow answered by a worker failed; a chamvi error of the app is raised as itself.

    Raises:
        ChamviError: the app's own error (an unknown agent, say), by its code; a validation error
            with its issues.
    """
    cause: BaseException | None = error.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ApplicationError) and cause.type == ChamviValidationError.code:
        raise ChamviValidationError(cause.message, issues=_issues(cause.details)) from None
    if isinstance(cause, ApplicationError) and cause.type in _ERRORS_BY_CODE:
        raise _ERRORS_BY_CODE[cause.type](cause.message) from None
    return cause


def _issues(details: Sequence[Any]) -> list[ValidationIssue]:
    """The issues a validation error carried across Temporal (``chamvi._activity_boundary.as_failure``)."""
    found = details[0].get("issues") if details and isinstance(details[0], dict) else None
    return [
        ValidationIssue(tuple(i.get("path", ())), str(i.get("message", "")), str(i.get("code", "")))
        for i in found or ()
        if isinstance(i, dict)
    ]


@dataclass(frozen=True)
class DispatchResult:
    """What :meth:`ChamviClient.dispatch` answers: the run's id, and whether this call started it."""

    run_id: str
    created: bool
    """False when an idempotency key matched an existing run (a redelivery)."""


def _check_key(field: str, value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or len(value) > c.TRIGGER_KEY_MAX_LENGTH or "\0" in value:
        raise InvalidInputError(
            f"{field} {value!r} is invalid: use 1-{c.TRIGGER_KEY_MAX_LENGTH} characters without NUL"
        )


_PENDING_STATE = {
    PendingActivityState.PENDING_ACTIVITY_STATE_STARTED: "started",
    PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED: "cancel_requested",
}


def _time(message: Any, field: str) -> datetime | None:
    return getattr(message, field).ToDatetime(tzinfo=UTC) if message.HasField(field) else None


def run_id_for(run_input: RunInput) -> str:
    """The run's workflow id: derived from the idempotency key (scoped to the invoker), else random."""
    if run_input.idempotency_key is None:
        return f"{c.RUN_ID_PREFIX}{run_input.agent}-{uuid.uuid4().hex}"
    scope = run_input.agent
    if run_input.invoker is not None:
        scope = f"{run_input.agent}:{run_input.channel or ''}:{run_input.invoker.kind}:{run_input.invoker.id}"
    digest = hashlib.sha256(f"{scope}\0{run_input.idempotency_key}".encode()).hexdigest()[:32]
    return f"{c.RUN_ID_PREFIX}{run_input.agent}-{digest}"


def _check_agent_name(agent: str) -> None:
    """An agent name a caller gave: a malformed one is invalid input, not a bad definition."""
    try:
        validate_agent_name(agent)
    except InvalidAgentDefinitionError as error:
        raise InvalidInputError(error.message) from None


def validate_run_input(run_input: RunInput) -> None:
    """Refuses, before anything reaches Temporal, an input the workflow would fail on anyway.

    Raises:
        InvalidInputError: a bad agent name, a key too long or holding NUL, a payload that is not JSON,
            or model settings out of range (what the agent's tools and provider allow is checked
            by its first model step).
    """
    _check_agent_name(run_input.agent)
    for field in (
        "trigger",
        "channel",
        "subscription",
        "address",
        "idempotency_key",
        "concurrency_key",
        "event",
    ):
        _check_key(field, getattr(run_input, field))
    try:
        json.dumps(run_input.payload)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"payload is not JSON: {error}") from None
    if run_input.model_settings is not None:
        problems = run_input.model_settings.problems()
        if problems:
            raise InvalidInputError(f"model_settings: {'; '.join(problems)}")


def _run_settings(settings: ModelSettings | Mapping[str, Any] | None) -> ModelSettings | None:
    """A dispatch's model settings as a ``ModelSettings``; empty ones are none.

    Raises:
        InvalidInputError: data that is not model settings, naming the field.
    """
    if settings is None or isinstance(settings, ModelSettings):
        return None if settings is None or settings.empty else settings
    if not isinstance(settings, Mapping):
        raise InvalidInputError(f"model_settings must be a ModelSettings(...) or its data, not {settings!r}")
    try:
        checked = ModelSettings.model_validate(settings)
    except PydanticValidationError as error:
        issues = validation_issues(error.errors(include_input=False))
        found = "; ".join(f"{i.where}: {i.message}" for i in issues)
        raise InvalidInputError(f"model_settings: {found}") from None
    return None if checked.empty else checked


class ChamviClient:
    """Runs, conversations and knowledge collections through Temporal, for the API, the CLI, your code.

    The runs are its own methods; the rest are families reached as attributes
    (``client.conversations.send(...)``, ``client.approvals.approve(run_id)``,
    ``client.schedules.create(...)``, ``client.agents``, ``client.state``, ``client.knowledge``).
    The methods' old names (``client.send_message``, ``client.approve``, ...) still work for one
    release, with a ``DeprecationWarning``.

    A run's view is a query a worker answers; with no worker polling, ``get_run`` falls back to the
    run's search attributes instead of hanging.

    Args:
        client: a connected Temporal client.
        task_queue: the workers' task queue, where runs are started.
        artifacts: where attachments are stored; the workers must use the same store.
        attachment_max_bytes: the size limit per attachment.
        approval_tokens: checks the approval tokens :meth:`Approvals.resume` takes, under the workers' secret
            (``chamvi.approval_tokens.approval_tokens(settings)``); without it, ``approvals.resume`` refuses.
    """

    def __init__(
        self,
        client: Client,
        task_queue: str = c.TASK_QUEUE,
        *,
        artifacts: ArtifactStore | None = None,
        attachment_max_bytes: int = c.DEFAULT_ATTACHMENT_MAX_BYTES,
        approval_tokens: ApprovalTokens | None = None,
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self.artifacts = artifacts
        self.attachment_max_bytes = attachment_max_bytes
        self.approval_tokens = approval_tokens
        self.open_streams = 0
        """How many ``events()`` iterators are open (each holds one history long-poll)."""
        self._dispatched: dict[str, str] = {}
        """The runs this client started and has not seen end, with their agent (``idle`` reads them
        one by one: the visibility list may not show them yet)."""

    async def dispatch(
        self,
        agent: str,
        payload: Any = None,
        *,
        trigger: str = "manual",
        channel: str | None = None,
        address: str | None = None,
        subscription: str | None = None,
        invoker: Invoker | None = None,
        idempotency_key: str | None = None,
        concurrency_key: str | None = None,
        attachments: Sequence[Attachment] = (),
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> DispatchResult:
        """Starts a run, or returns the existing one when the idempotency key was seen before.

        ``attachments`` are stored as the run's first artifacts before it starts (a redelivery stores
        nothing) and reach the model as parts of the run's first message. ``model_settings`` (a
        ``ModelSettings`` or its data) are this run's own: each of its model steps sends them over
        the agent's, field by field, and records what it sent. A worker is asked first whether the
        agent lets a dispatch set them (its ``dispatch_settings``); with none answering within
        ``AGENT_CHECK_TIMEOUT``, the run starts and its first model step refuses what is not allowed.

        Raises:
            InvalidInputError: a field the run would refuse, or attachments without an artifact store.
            ChamviValidationError: ``model_settings`` set what the agent does not let a dispatch set,
                or past a cap (an issue at ``model_settings.<field>`` each); nothing is started.
            AttachmentTooLargeError: an attachment over the size limit.
            ChamviValidationError: an attachment's media type is not ``type/subtype`` (parameters
                such as ``; charset=utf-8`` are refused); nothing is stored.
        """
        run_input = RunInput(
            agent=agent,
            payload=payload,
            trigger=trigger,
            channel=channel,
            address=address,
            subscription=subscription,
            invoker=invoker,
            idempotency_key=idempotency_key,
            concurrency_key=concurrency_key,
            model_settings=_run_settings(model_settings),
        )
        if run_input.model_settings is not None:
            validate_run_input(run_input)
            await self.agents.check(agent, channel=channel, model_settings=run_input.model_settings)
        return await self.start(run_input, attachments)

    async def start(self, run_input: RunInput, attachments: Sequence[Attachment] = ()) -> DispatchResult:
        """Starts the run ``run_input`` describes whole (a run started by a run carries its parent)."""
        validate_run_input(run_input)
        run_id = run_id_for(run_input)
        if attachments:
            if run_input.idempotency_key is not None and await self._exists(run_id):
                self._dispatched[run_id] = run_input.agent
                return DispatchResult(run_id=run_id, created=False)
            stored = await self._store_attachments(run_id, attachments)
            run_input = run_input.model_copy(update={"attachments": stored})
        agent, channel, trigger = run_input.agent, run_input.channel, run_input.trigger
        concurrency_key = run_input.concurrency_key
        attributes = [
            SearchAttributePair(c.SA_AGENT, agent),
            SearchAttributePair(c.SA_STATUS, RunStatus.QUEUED.value),
        ]
        if channel:
            attributes.append(SearchAttributePair(c.SA_CHANNEL, channel))
        try:
            await self.client.start_workflow(
                c.AGENT_RUN_WORKFLOW,
                run_input,
                id=run_id,
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes(attributes),
                static_summary=static_summary(agent, trigger),
                static_details=static_details(
                    agent=agent, trigger=trigger, channel=channel, invoker=run_input.invoker, run_id=run_id
                ),
            )
        except WorkflowAlreadyStartedError:
            self._dispatched[run_id] = agent
            return DispatchResult(run_id=run_id, created=False)
        self._dispatched[run_id] = agent
        if concurrency_key is not None:
            # joining the queue here, not only from the run, keeps the key's order the dispatch order
            await enqueue(self.client, self.task_queue, LockRequest(key=concurrency_key, run_id=run_id))
        return DispatchResult(run_id=run_id, created=True)

    async def _store_attachments(self, run_id: str, attachments: Sequence[Attachment]) -> list[Artifact]:
        """Stores a dispatch's files as the run's first artifacts, all checked before any is stored."""
        if self.artifacts is None:
            raise InvalidInputError(
                "this client has no artifact store for attachments: ChamviClient(..., artifacts=...)"
            )
        for index, attachment in enumerate(attachments):
            attachment.check_size(self.attachment_max_bytes)
            check_media_type(attachment.kind, ("attachments", index, "media_type"))
        return [
            await self.artifacts.put(run_id, index, a.kind, a.data, a.filename)
            for index, a in enumerate(attachments)
        ]

    async def _exists(self, run_id: str) -> bool:
        """Whether a workflow has this id: a redelivered dispatch must store no attachment again.

        Two deliveries racing past this check store the same files under the same ids, and one
        run starts.
        """
        try:
            await self._handle(run_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def _ask_worker(
        self,
        workflow: str,
        request: Any,
        workflow_id: str,
        result_type: type[T],
        timeout: timedelta,
        what: str,
        *,
        forget: bool = False,
    ) -> T:
        """The answer of a short workflow a worker runs (it holds the App and the stores).

        ``forget``: a question that changes nothing, whose workflow is deleted once answered.

        Raises:
            ChamviError: the worker's own error, by its code.
            UnavailableError: no worker answered within ``timeout``.
        """
        try:
            result: T = await self.client.execute_workflow(
                workflow,
                request,
                id=workflow_id,
                task_queue=self.task_queue,
                execution_timeout=timeout,
                result_type=result_type,
            )
        except WorkflowFailureError as error:
            cause = _worker_cause(error)
            if isinstance(cause, TemporalTimeoutError):
                raise UnavailableError(
                    f"no worker answered on task queue {self.task_queue!r} within "
                    f"{timeout.total_seconds():g} s: start one with `chamvi dev` or `chamvi worker`"
                ) from None
            raise ChamviError(f"the worker could not {what}: {cause}") from None
        finally:
            if forget:
                await self._forget(workflow_id)
        return result

    async def _forget(self, workflow_id: str) -> None:
        """Deletes a question's workflow once answered, so the Temporal UI's list holds runs, not checks.

        Temporal removes a deleted workflow from its list within seconds (about 30 on a loaded dev
        server). A refused delete (a loaded server's deadline, a brief outage) is tried again, up to
        ``FORGET_ATTEMPTS`` times with a doubling pause: dropped, it left the check in the list for
        the namespace's retention. One that still fails is logged and left to the retention: the
        answer stands either way.
        """
        request = DeleteWorkflowExecutionRequest(
            namespace=self.client.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id)
        )
        pause = FORGET_FIRST_PAUSE_SECONDS
        for attempt in range(1, FORGET_ATTEMPTS + 1):
            try:
                await self.client.workflow_service.delete_workflow_execution(request)
                return
            except RPCError as error:
                if error.status == RPCStatusCode.NOT_FOUND:
                    return  # deleted already (an earlier attempt the answer of which was lost)
                if attempt == FORGET_ATTEMPTS:
                    log.warning(
                        "could not delete workflow %r after %d attempts, left to the namespace's "
                        "retention: %s (%s)",
                        workflow_id,
                        attempt,
                        error.message,
                        error.status.name,
                    )
                    return
                log.debug("deleting workflow %r failed, trying again: %s", workflow_id, error.message)
            await asyncio.sleep(pause)
            pause *= 2

    def _handle(self, run_id: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(run_id)

    async def _describe(self, run_id: str) -> Any:
        """The run's description, refusing a workflow of another type as no run.

        A concurrency lock or a collection is no run: reading, approving, cancelling or waiting on it
        as one would break what it serves (a cancelled lock never grants its key again).
        """
        try:
            description = await self._handle(run_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFoundError(f"no run {run_id!r}") from None
            raise
        if description.workflow_type != c.AGENT_RUN_WORKFLOW:
            raise RunNotFoundError(f"no run {run_id!r}")
        return description

    async def agent_of(self, run_id: str) -> str:
        """The agent a run runs, from its search attributes (no worker needed).

        Raises:
            RunNotFoundError: no such run.
        """
        description = await self._describe(run_id)
        return description.typed_search_attributes.get(c.SA_AGENT) or ""

    async def get_run(self, run_id: str) -> RunView:
        """The run as its workflow knows it (a query); when no worker answers, from its history.

        A completed run then comes from its result (its steps left out); any other, from its attributes.

        ``calls`` are its calls in progress, from Temporal's pending activities.
        """
        description = await self._describe(run_id)
        calls = await self._calls(description)
        try:
            # a query waits for a worker: with none polling, answer from the attributes instead of hanging
            view: RunView = await self._handle(run_id).query(
                c.QUERY_RUN, result_type=RunView, rpc_timeout=QUERY_TIMEOUT
            )
            return view.model_copy(update={"calls": calls})
        except (WorkflowQueryFailedError, RPCError):
            if description.status == WorkflowExecutionStatus.COMPLETED:
                # the result is in the history and needs no worker: the view without its steps beats
                # one without its output when a busy or stopped worker lets the query time out
                handle = self.client.get_workflow_handle(run_id, result_type=RunView)
                finished: RunView = await handle.result()
                return finished.model_copy(update={"calls": calls})
            attributes = description.typed_search_attributes
            status = _TEMPORAL_STATUS.get(description.status) or RunStatus(
                attributes.get(c.SA_STATUS) or RunStatus.QUEUED.value
            )
            return RunView.model_validate(
                {
                    "run_id": run_id,
                    "agent": attributes.get(c.SA_AGENT) or "",
                    "status": status,
                    "trigger": {"channel": attributes.get(c.SA_CHANNEL)},
                    "created_at": description.start_time,
                    "ended_at": description.close_time,
                    "calls": calls,
                }
            )

    async def _calls(self, description: Any) -> list[CallInProgress]:
        calls = []
        for pending in description.raw_description.pending_activities:
            doing = None
            if pending.heartbeat_details.payloads:
                details = await self.client.data_converter.decode(pending.heartbeat_details.payloads)
                doing = details[0] if details and isinstance(details[0], str) else None
            failure = pending.last_failure.message if pending.HasField("last_failure") else None
            calls.append(
                CallInProgress(
                    activity=pending.activity_type.name,
                    doing=doing,
                    state=_PENDING_STATE.get(pending.state, "scheduled"),
                    attempt=pending.attempt,
                    maximum_attempts=pending.maximum_attempts,
                    started_at=_time(pending, "last_started_time"),
                    last_heartbeat_at=_time(pending, "last_heartbeat_time"),
                    last_failure=failure or None,
                    next_attempt_at=_time(pending, "next_attempt_schedule_time"),
                )
            )
        return calls

    async def wait(self, run_id: str) -> RunView:
        """Waits until the run settles, however it settles, and returns it."""
        await self._describe(run_id)
        try:
            await self._handle(run_id).result()
        except WorkflowFailureError:
            pass
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFoundError(f"no run {run_id!r}") from None
            raise
        return await self.get_run(run_id)

    async def is_open(self, run_id: str) -> bool:
        """Whether the run has yet to end (its history may still grow).

        Raises:
            RunNotFoundError: there is no such run.
        """
        description = await self._describe(run_id)
        return bool(description.status == WorkflowExecutionStatus.RUNNING)

    async def events(self, run_id: str, after: int | None = None) -> AsyncGenerator[RunEvent, None]:
        """The run's events (``chamvi.run_events``) after event id ``after``, until the run ends.

        Built on Temporal's long-poll of the workflow history: each event arrives as the run
        records it. Pass the ``event_id`` of the last event seen as ``after`` to resume without gaps
        or repeats. Closing the iterator (``aclose()``, or leaving an ``async for``) ends the poll.

        Raises:
            RunNotFoundError: there is no such run.
        """
        description = await self._describe(run_id)
        self.open_streams += 1
        try:
            async for event in history_events(self.client, run_id, after, execution=description.run_id):
                yield event
        finally:
            self.open_streams -= 1

    async def list_runs(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 20,
        channel: str | None = None,
    ) -> list[RunSummary]:
        """The most recent runs first, from search attributes: no worker needed.

        Raises:
            InvalidInputError: ``status`` is not a :class:`~chamvi.models.RunStatus` value.
        """
        clauses = [f'WorkflowType = "{c.AGENT_RUN_WORKFLOW}"']
        if agent is not None:
            clauses.append(f'{c.SA_AGENT.name} = "{_quote(agent)}"')
        if channel is not None:
            clauses.append(f'{c.SA_CHANNEL.name} = "{_quote(channel)}"')
        if status is not None:
            if status not in {s.value for s in RunStatus}:
                raise InvalidInputError(
                    f"unknown status {status!r}: use one of {', '.join(s.value for s in RunStatus)}"
                )
            clauses.append(f'{c.SA_STATUS.name} = "{status}"')
        runs: list[RunSummary] = []
        async for execution in self.client.list_workflows(" AND ".join(clauses), limit=limit):
            attributes = execution.typed_search_attributes
            runs.append(
                RunSummary(
                    run_id=execution.id,
                    agent=attributes.get(c.SA_AGENT),
                    status=attributes.get(c.SA_STATUS),
                    channel=attributes.get(c.SA_CHANNEL),
                    started_at=execution.start_time,
                    closed_at=execution.close_time,
                )
            )
        return runs

    async def idle(self, agent: str | None = None, *, timeout: timedelta | None = None) -> None:
        """Waits until no run of ``agent`` (or none at all) on this task queue is queued or running.

        The seed's ``idle()``. A run waiting for an approval does not count: it has freed its slot
        until a person answers.
        Every run this client dispatched is read from its own state, so one dispatched a moment ago
        is waited for even before Temporal's visibility lists it; runs other processes started are
        found through that list, which may lag behind by a moment (see ``chamvi._idle``).

        Raises:
            IdleTimeoutError: ``timeout`` ran out first, naming the runs still in progress.
        """
        await wait_idle(self.client, self.task_queue, self._dispatched, agent, timeout)

    async def cancel(self, run_id: str) -> None:
        """Requests cancellation; the run settles ``cancelled`` once its workflow handles it.

        Raises:
            RunNotFoundError: no run has this id.
            InvalidRunStateError: the run has ended already.
        """
        description = await self._describe(run_id)
        if description.status != WorkflowExecutionStatus.RUNNING:
            status = _TEMPORAL_STATUS.get(description.status)
            raise InvalidRunStateError(
                f"run {run_id!r} has already ended ({status.value if status else description.status}): "
                "nothing to cancel"
            )
        await self._handle(run_id).cancel()

    # -- the families of methods, reached as attributes (as openai-python groups its resources) -------

    @cached_property
    def conversations(self) -> Conversations:
        """Messages to agents and their turns (:class:`~chamvi.conversations.client.Conversations`)."""
        return Conversations(self)

    @cached_property
    def approvals(self) -> Approvals:
        """Answers to the approvals runs wait on, by run or by token (:class:`Approvals`)."""
        return Approvals(self)

    @cached_property
    def schedules(self) -> Schedules:
        """Agent schedules created at runtime (:class:`~chamvi.schedules.Schedules`)."""
        return Schedules(self.client, self.task_queue)

    @cached_property
    def agents(self) -> Agents:
        """The agents the workers serve, and runtime agents (:class:`Agents`)."""
        return Agents(self)

    @cached_property
    def state(self) -> State:
        """What agents keep, read by a worker (:class:`State`)."""
        return State(self)

    @cached_property
    def knowledge(self) -> Knowledge:
        """The knowledge collections' workflows (:class:`Knowledge`)."""
        return Knowledge(self)

    # -- the old names, kept for one release: each warns and answers its new place's method ---------

    send_message = _Moved("conversations.send")
    wait_turn = _Moved("conversations.wait_turn")
    turn_started = _Moved("conversations.turn_started")
    conversation = _Moved("conversations.get")
    conversation_messages = _Moved("conversations.messages")
    list_conversations = _Moved("conversations.list")
    delete_conversation = _Moved("conversations.delete")
    approve = _Moved("approvals.approve")
    resume = _Moved("approvals.resume")
    pending_approval = _Moved("approvals.pending")
    create_schedule = _Moved("schedules.create")
    list_schedules = _Moved("schedules.list")
    get_schedule = _Moved("schedules.get")
    pause_schedule = _Moved("schedules.pause")
    unpause_schedule = _Moved("schedules.unpause")
    delete_schedule = _Moved("schedules.delete")
    check_agent = _Moved("agents.check")
    put_agent = _Moved("agents.put")
    remove_agent = _Moved("agents.remove")
    get_agent = _Moved("agents.get")
    list_agents = _Moved("agents.list")
    state_list = _Moved("state.list")
    sync_knowledge = _Moved("knowledge.sync")
    knowledge_state = _Moved("knowledge.state")


class Agents:
    """``client.agents``: the agents the workers serve, and the ones defined at runtime.

    A worker answers each call: it holds the App and the stores (``chamvi.dynamic_agents``).
    """

    def __init__(self, core: ChamviClient) -> None:
        self._core = core

    async def check(
        self,
        agent: str,
        *,
        channel: str | None = None,
        model_settings: ModelSettings | None = None,
        timeout: timedelta = AGENT_CHECK_TIMEOUT,
    ) -> bool:
        """Asks a worker on the task queue whether its app serves ``agent``, before a dispatch.

        A process without the app (the CLI) learns of an unknown agent at once, with the app's
        own message, rather than from a run that fails later. True when a worker said yes; False
        when none answered within ``timeout`` (a run dispatched now waits in the queue for one).
        With ``model_settings``, the worker also checks them against the agent's ``dispatch_settings``.

        Raises:
            AgentNotFoundError: the worker's app does not serve ``agent`` (or another
                ``ChamviError`` the app raised describing it).
            ChamviValidationError: ``model_settings`` set what the agent does not let a dispatch set.
        """
        _check_agent_name(agent)
        workflow_id = f"{c.AGENT_CHECK_ID_PREFIX}{uuid.uuid4().hex}"
        try:
            await self._core.client.execute_workflow(
                c.AGENT_CHECK_WORKFLOW,
                DescribeAgentRequest(agent=agent, channel=channel, model_settings=model_settings),
                id=workflow_id,
                task_queue=self._core.task_queue,
                execution_timeout=timeout,
            )
        except WorkflowFailureError as error:
            cause = _worker_cause(error)
            if isinstance(cause, TemporalTimeoutError):
                return False
            raise ChamviError(f"the worker could not describe agent {agent!r}: {cause}") from None
        finally:
            await self._core._forget(workflow_id)
        return True

    async def put(
        self,
        name: str,
        definition: Mapping[str, Any] | AgentDefinition,
        *,
        by: Invoker | None = None,
        timeout: timedelta = AGENT_REGISTRY_TIMEOUT,
    ) -> AgentPutResult:
        """Puts agent ``name`` made of data as its next revision (the seed's ``putAgent``).

        A worker checks ``definition`` against its App (the tools it names come from
        ``App(runtime_tools=...)``, its model from the App's registry) and stores the revision where
        every worker reads it; new runs of ``name`` start on it, runs already going keep theirs. A
        definition equal to the latest revision writes nothing.

        Raises:
            ChamviValidationError: the name or definition is invalid (``issues`` by field path).
            ConflictError: an agent in code has the name.
            UnavailableError: no worker answered within ``timeout``.
        """
        checked_agent_name(name)
        data = (
            definition.model_dump(mode="json", exclude_none=True)
            if isinstance(definition, AgentDefinition)
            else dict(definition)
        )
        request = AgentRegistryRequest(action="put", name=name, definition=data, by=by)
        result = await self._agent_registry(request, timeout)
        assert result.put is not None
        return result.put

    async def remove(
        self, name: str, *, by: Invoker | None = None, timeout: timedelta = AGENT_REGISTRY_TIMEOUT
    ) -> int:
        """Makes runtime agent ``name`` unavailable for new runs (the seed's ``removeAgent``).

        Runs already going finish on their revision. Returns the number of the revision that removed
        it; a later put makes the next one.

        Raises:
            AgentNotFoundError: no runtime agent of that name is live.
            ConflictError: an agent in code has the name.
            UnavailableError: no worker answered within ``timeout``.
        """
        request = AgentRegistryRequest(action="remove", name=name, by=by)
        result = await self._agent_registry(request, timeout)
        assert result.removed_revision is not None
        return result.removed_revision

    async def get(
        self, name: str, revision: int | None = None, *, timeout: timedelta = AGENT_REGISTRY_TIMEOUT
    ) -> AgentInfo:
        """Agent ``name`` (the seed's ``getAgent``): in code, or a runtime agent with its definition.

        Raises:
            AgentNotFoundError: no such agent (or no such revision of it).
            UnavailableError: no worker answered within ``timeout``.
        """
        request = AgentRegistryRequest(action="get", name=name, revision=revision)
        result = await self._agent_registry(request, timeout)
        assert result.agent is not None
        return result.agent

    async def list(self, *, timeout: timedelta = AGENT_REGISTRY_TIMEOUT) -> builtins.list[AgentInfo]:
        """Every agent the workers start runs of (the seed's ``listAgents``): in code, then at runtime.

        Raises:
            UnavailableError: no worker answered within ``timeout``.
        """
        return (await self._agent_registry(AgentRegistryRequest(action="list"), timeout)).agents

    async def _agent_registry(self, request: AgentRegistryRequest, timeout: timedelta) -> AgentRegistryResult:
        workflow_id = f"{c.AGENT_REGISTRY_ID_PREFIX}{uuid.uuid4().hex}"
        return await self._core._ask_worker(
            c.AGENT_REGISTRY_WORKFLOW,
            request.model_copy(update={"request_id": workflow_id}),
            workflow_id,
            AgentRegistryResult,
            timeout,
            f"{request.action} agents",
            # a put or a remove keeps its workflow: its history says who changed the agent, and when
            forget=request.action in ("get", "list"),
        )


class State:
    """``client.state``: what agents keep (``chamvi.state``), read by a worker."""

    def __init__(self, core: ChamviClient) -> None:
        self._core = core

    async def list(
        self,
        agent: str,
        collection: str | None = None,
        *,
        limit: int = 20,
        offset: int = 0,
        timeout: timedelta = STATE_LIST_TIMEOUT,
    ) -> StateListing:
        """A page of ``agent``'s state, read by a worker (the one process that holds Qdrant locally).

        Without ``collection``: its key-value entries and the size of each declared collection.

        Raises:
            AgentNotFoundError, NotFoundError: the worker's app has no such agent or collection.
            UnavailableError: no worker answered within ``timeout``.
        """
        _check_agent_name(agent)
        request = StateListRequest(agent=agent, collection=collection, limit=limit, offset=offset)
        return await self._core._ask_worker(
            c.AGENT_STATE_LIST_WORKFLOW,
            request,
            f"{c.AGENT_STATE_LIST_ID_PREFIX}{uuid.uuid4().hex}",
            StateListing,
            timeout,
            f"list the state of agent {agent!r}",
            forget=True,
        )


class Knowledge:
    """``client.knowledge``: the knowledge collections' workflows, on this namespace."""

    def __init__(self, core: ChamviClient) -> None:
        self._core = core

    async def sync(self, name: str) -> None:
        """Asks collection ``name`` for a pass now; during a pass, exactly one more pass follows it."""
        await request_sync(self._core.client, self._core.task_queue, name)

    async def state(self, name: str) -> CollectionState:
        """What the collection's workflow knows: status, counts, the last pass, an error and its retry."""
        try:
            state: CollectionState = await self._core._handle(c.KNOWLEDGE_ID_PREFIX + name).query(
                c.QUERY_KNOWLEDGE_STATE, result_type=CollectionState, rpc_timeout=QUERY_TIMEOUT
            )
            return state
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise InvalidInputError(
                    f"no knowledge collection {name!r} has been indexed on this namespace"
                ) from None
            raise


class Approvals:
    """``client.approvals``: answering the approvals runs wait on, by run or by approval token.

    The token's cryptography is ``chamvi.approval_tokens``'s; this checks a token with the client's
    ``approval_tokens`` and answers through the run.
    """

    def __init__(self, core: ChamviClient) -> None:
        self._core = core

    async def approve(
        self,
        run_id: str,
        *,
        approved: bool = True,
        reason: str | None = None,
        approval_id: str | None = None,
        approver: Invoker | None = None,
    ) -> str:
        """Answers the approval the run waits on (or ``approval_id``); returns the id answered."""
        if approval_id is None:
            run = await self._core.get_run(run_id)
            if run.waiting is None:
                raise InvalidRunStateError(
                    f"run {run_id!r} is not waiting for an approval (it is {run.status.value})"
                )
            approval_id = run.waiting.approval_id
        else:
            await self._core._describe(run_id)
        answer = ApprovalAnswer(approval_id=approval_id, approved=approved, reason=reason, approver=approver)
        try:
            await self._core._handle(run_id).execute_update(c.UPDATE_ANSWER_APPROVAL, answer)
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            raise ApprovalNotPendingError(message) from None
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise InvalidRunStateError(f"run {run_id!r} has ended: nothing to approve") from None
            raise
        return approval_id

    def _claims(self, token: str) -> ApprovalClaims:
        tokens = self._core.approval_tokens
        if tokens is None:
            raise InvalidInputError(
                "this client cannot check approval tokens: build it with "
                "ChamviClient(..., approval_tokens=approval_tokens(settings)), the workers' secret"
            )
        return tokens.verify(token)

    async def pending(self, token: str) -> PendingApproval:
        """The approval ``token`` answers, while it is pending: what its holder is shown before answering.

        Raises:
            ApprovalTokenInvalidError: ``approval_token_invalid``: not a token of the workers' secret.
            ApprovalTokenExpiredError: ``approval_token_expired``: past the approval's deadline.
            ApprovalNotPendingError: ``approval_not_pending``: the approval was answered, timed out,
                or its run has ended.
            UnavailableError: no worker answers for the run now.
            InvalidInputError: this client has no ``approval_tokens``.
        """
        claims = self._claims(token)
        try:
            run = await self._core.get_run(claims.run_id)
        except RunNotFoundError:
            raise ApprovalNotPendingError(NOT_PENDING) from None
        waiting = run.waiting
        if waiting is None and run.status == RunStatus.WAITING:
            raise UnavailableError("no worker answers for this approval's run now: try again in a moment")
        if waiting is None or waiting.approval_id != claims.approval_id:
            raise ApprovalNotPendingError(NOT_PENDING)
        return PendingApproval(
            run_id=claims.run_id,
            approval_id=claims.approval_id,
            agent=run.agent,
            tool=waiting.tool,
            until=waiting.until,
            title=waiting.title if claims.detail else None,
            body=waiting.body if claims.detail else None,
        )

    async def resume(self, token: str, decision: ApprovalDecision) -> ResumedApproval:
        """Answers the approval an approval token names, knowing neither the run nor the approval id.

        The seed's ``resume(token, decision)``; see ``chamvi.approval_tokens``. The decision's
        ``approver`` is recorded, else :data:`~chamvi.approval_tokens.TOKEN_HOLDER`.

        Raises:
            ApprovalTokenInvalidError: ``approval_token_invalid``: not a token of the workers' secret.
            ApprovalTokenExpiredError: ``approval_token_expired``: past the approval's deadline.
            ApprovalNotPendingError: ``approval_not_pending``: used already, or answered otherwise,
                timed out, or the run has ended.
            InvalidInputError: this client has no ``approval_tokens``.
        """
        claims = self._claims(token)
        try:
            await self.approve(
                claims.run_id,
                approved=decision.approved,
                reason=decision.reason,
                approval_id=claims.approval_id,
                approver=decision.approver or TOKEN_HOLDER,
            )
        except (ApprovalNotPendingError, InvalidRunStateError, RunNotFoundError):
            # the validator's own message names the approval the run waits on now: not the holder's business
            raise ApprovalNotPendingError(NOT_PENDING) from None
        approved = decision.approved
        return ResumedApproval(run_id=claims.run_id, approval_id=claims.approval_id, approved=approved)


async def resume(client: ChamviClient, token: str, decision: ApprovalDecision) -> ResumedApproval:
    """Deprecated: ``client.approvals.resume(token, decision)``; kept for one release."""
    warnings.warn(
        "chamvi.resume(client, token, decision) is deprecated: use client.approvals.resume(token, decision)",
        DeprecationWarning,
        stacklevel=2,
    )
    return await client.approvals.resume(token, decision)


def _quote(value: str) -> str:
    return re.sub(r'(["\\])', r"\\\1", value)
