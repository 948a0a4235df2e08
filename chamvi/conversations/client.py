"""Conversations through Temporal, from any process: ``ChamviClient.conversations``.

A message is the ``send_message`` update of the conversation's workflow, sent with update-with-start,
so the first message starts the conversation and every later one finds it; the update answers once
the message is queued, with the run id its turn has (or will have). Reading a conversation's
messages reads the conversation store, which the client shares with the workers through the
artifact store.
"""

from __future__ import annotations

import asyncio
import builtins
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi._names import validate_agent_name
from chamvi.artifacts import ArtifactStore, Attachment, names_a_folder
from chamvi.conversations.store import ConversationStore
from chamvi.errors import (
    ERROR_CLASSES,
    ChamviError,
    InvalidAgentDefinitionError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from chamvi.models import Artifact, Invoker, RunView
from chamvi.models.conversations import (
    ConversationMessage,
    ConversationPage,
    ConversationState,
    ConversationSummary,
    ConversationView,
    MessageAccepted,
    MessageIn,
    QueuedMessage,
    TurnRecord,
    conversation_workflow_id,
    turn_run_id,
)

QUERY_TIMEOUT = timedelta(seconds=5)
TURN_START_POLL = (0.02, 1.0)
"""How often ``wait_turn`` looks for a queued turn's run: from 20 ms, growing to a second."""
_ERRORS_BY_CODE = {cls.code: cls for cls in ERROR_CLASSES}
_DOTS = re.compile(r"^\.+$")


@dataclass(frozen=True)
class SentMessage:
    """What :meth:`Conversations.send` answers: the conversation, and the message's turn."""

    agent: str
    conversation: str
    run_id: str
    """The turn's run: it exists once the turn starts (at once when nothing waits before it)."""
    turn: int
    created: bool
    """False when the message id was seen before: this is the turn it started then."""


def check_conversation_id(value: str) -> str:
    """``value`` once it can name a conversation.

    Raises:
        InvalidInputError: it is empty, too long (in characters, or in bytes once quoted as the
            store's folder name: 200 ``é`` are 1 200), holds NUL or a control character, or is dots
            only.
    """
    if (
        not isinstance(value, str)
        or not value
        or len(value) > c.CONVERSATION_ID_MAX_LENGTH
        or any(ord(ch) < 32 for ch in value)
        or _DOTS.match(value)
        or not names_a_folder(value)
    ):
        raise InvalidInputError(
            f"conversation id {value!r} is invalid: use 1-{c.CONVERSATION_ID_MAX_LENGTH} characters "
            "without control characters (and not only dots), at most 255 bytes percent-encoded as UTF-8 "
            "(the store's folder name)"
        )
    return value


def _check_agent(agent: str) -> None:
    try:
        validate_agent_name(agent)
    except InvalidAgentDefinitionError as error:
        raise InvalidInputError(error.message) from None


def _quote(value: str) -> str:
    return re.sub(r'(["\\])', r"\\\1", value)


def new_conversation_id() -> str:
    """A fresh conversation id, for a caller that names none."""
    return f"c-{uuid.uuid4().hex[:16]}"


def _refusal(error: WorkflowUpdateFailedError) -> ChamviError:
    cause: BaseException | None = error.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    if isinstance(cause, ApplicationError):
        cls = _ERRORS_BY_CODE.get(cause.type or "", ChamviError)
        delay = cause.next_retry_delay
        return cls(cause.message, retry_after=delay.total_seconds() if delay is not None else None)
    return ChamviError(f"the conversation refused the message: {error.cause or error}")


@dataclass
class _Gate:
    """One conversation's messages this client is sending: a few in flight, the rest in arrival order."""

    slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(c.CONVERSATION_SENDS_IN_FLIGHT)
    )
    users: int = 0
    """Senders holding or waiting for a slot: at none, the gate is dropped."""


def _record_messages(record: TurnRecord) -> list[ConversationMessage]:
    messages = [
        ConversationMessage(
            turn=record.turn,
            run_id=record.run_id,
            message_id=record.message_id,
            role="user",
            text=record.text,
            at=record.received_at,
            invoker=record.invoker,
            status=record.status.value,
            attachments=record.attachments,
        )
    ]
    if record.answer is not None or record.error is not None:
        messages.append(
            ConversationMessage(
                turn=record.turn,
                run_id=record.run_id,
                message_id=record.message_id,
                role="assistant",
                text=record.answer,
                at=record.ended_at,
                status=record.status.value,
                error=record.error,
            )
        )
    return messages


def _pending_message(queued: QueuedMessage, status: str) -> ConversationMessage:
    message = queued.message
    return ConversationMessage(
        turn=queued.turn,
        role="user",
        text=message.text,
        run_id=queued.run_id,
        message_id=message.message_id,
        at=queued.received_at,
        invoker=message.invoker,
        status=status,
        attachments=message.attachments,
    )


class RunsCore(Protocol):
    """What the conversations use of the client's core, ``ChamviClient``.

    Named here so that this module imports nothing of ``chamvi.client``, which builds
    :class:`Conversations`.
    """

    client: Client
    task_queue: str
    artifacts: ArtifactStore | None

    async def get_run(self, run_id: str) -> RunView:
        """The run's view (``ChamviClient.get_run``)."""
        ...

    async def wait(self, run_id: str) -> RunView:
        """The run once it settles (``ChamviClient.wait``)."""
        ...

    async def _exists(self, run_id: str) -> bool: ...

    async def _store_attachments(self, run_id: str, attachments: Sequence[Attachment]) -> list[Artifact]: ...


class Conversations:
    """``client.conversations``: messages to agents and the conversations they make.

    Args:
        core: the client the conversations belong to (its Temporal client, task queue, artifact
            store and runs).
    """

    turns_per_run: int = c.CONVERSATION_TURNS_PER_RUN
    """Turns a conversation's workflow run takes before it continues as new; fewer in tests."""
    queue_max: int = c.CONVERSATION_QUEUE_MAX
    """Messages a conversation this client starts lets wait at once; fewer in tests."""
    def __init__(self, core: RunsCore) -> None:
        self._core = core
        self._gates: dict[str, _Gate] = {}
        """Per conversation workflow id, this client's messages on their way to it (``_sending``)."""

    async def send(
        self,
        agent: str,
        text: str = "",
        *,
        conversation: str | None = None,
        message_id: str | None = None,
        attachments: Sequence[Attachment] = (),
        invoker: Invoker | None = None,
        channel: str | None = None,
        address: str | None = None,
        subscription: str | None = None,
        reply: bool = False,
    ) -> SentMessage:
        """Sends a message to a conversation with ``agent`` (a new one without ``conversation``).

        Its turn runs once the turns before it have ended; a message id seen before answers the turn
        it started then, and starts nothing. ``attachments`` are stored as the turn's run's first
        artifacts and reach its model with the message.

        Args:
            agent: the agent the conversation is with.
            text: the message.
            conversation: the conversation's id; None starts a new one (its id is in the answer).
            message_id: the message's id, for resends; None makes one.
            attachments: files for the turn.
            invoker: who sends it (the HTTP API passes the token's principal).
            channel: the channel the message came over (a routed channel event).
            address: where on the channel it came from.
            subscription: the subscription that routed it.
            reply: send the turn's answer back through ``channel`` to ``address``.

        Raises:
            InvalidInputError: a bad agent name, conversation id, message id or text.
            AgentNotFoundError: the workers' app serves no such agent.
            UnavailableError: too many messages wait in the conversation already, or Temporal did not
                take the message (its ``retry_after`` says when to send it again, same id).
        """
        _check_agent(agent)
        conversation = (
            check_conversation_id(conversation) if conversation is not None else new_conversation_id()
        )
        message_id = message_id if message_id is not None else uuid.uuid4().hex
        if not isinstance(text, str):
            raise InvalidInputError(f"the message text must be a string, not {type(text).__name__}")
        run_id = turn_run_id(agent, conversation, message_id)
        stored: list[Artifact] = []
        if attachments:
            stored = await self._store_turn_attachments(run_id, attachments)
        message = MessageIn(
            message_id=message_id,
            text=text,
            invoker=invoker,
            attachments=stored,
            channel=channel,
            address=address,
            subscription=subscription,
            reply=reply,
        )
        workflow_id = conversation_workflow_id(agent, conversation)
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            c.CONVERSATION_WORKFLOW,
            ConversationState(
                agent=agent,
                id=conversation,
                turns_per_run=self.turns_per_run,
                queue_max=self.queue_max,
            ),
            id=workflow_id,
            task_queue=self._core.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(c.SA_AGENT, agent), SearchAttributePair(c.SA_CONVERSATION, conversation)]
            ),
            static_summary=f"conversation {conversation} with {agent}",
        )
        try:
            async with self._sending(workflow_id):
                accepted: MessageAccepted = await self._core.client.execute_update_with_start_workflow(
                    c.UPDATE_SEND_MESSAGE,
                    message,
                    start_workflow_operation=start,
                    result_type=MessageAccepted,
                )
        except WorkflowUpdateFailedError as error:
            raise _refusal(error) from None
        except RPCError as error:
            if error.status not in (RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.UNAVAILABLE):
                raise
            # Temporal's client retried with backoff already: the caller may send it again later
            wait = c.CONVERSATION_SEND_RETRY_SECONDS
            raise UnavailableError(
                f"Temporal did not take message {message_id!r} for conversation {conversation!r} "
                f"({error.message}): send it again with the same message_id in {wait} s",
                retry_after=wait,
            ) from None
        return SentMessage(
            agent=agent,
            conversation=conversation,
            run_id=accepted.run_id,
            turn=accepted.turn,
            created=accepted.created,
        )

    @asynccontextmanager
    async def _sending(self, workflow_id: str) -> AsyncIterator[None]:
        """Holds one of the conversation's send slots (``CONVERSATION_SENDS_IN_FLIGHT``) for the block.

        An update stays in flight at Temporal until the workflow has taken it; past 10 per workflow
        Temporal refuses the rest, so a burst waits here instead, in arrival order, and no dynamic
        config needs raising. The gate is forgotten once nobody waits on it.
        """
        gates = self._gates
        gate = gates.setdefault(workflow_id, _Gate())
        gate.users += 1
        try:
            async with gate.slots:
                yield
        finally:
            gate.users -= 1
            if not gate.users:
                del gates[workflow_id]

    async def _store_turn_attachments(
        self, run_id: str, attachments: Sequence[Attachment]
    ) -> builtins.list[Artifact]:
        core = self._core
        if core.artifacts is not None and await core._exists(run_id):
            # a resent message: its turn has its files already
            return await core.artifacts.list(run_id)
        return await core._store_attachments(run_id, attachments)

    async def wait_turn(self, sent: SentMessage, *, poll: tuple[float, float] = TURN_START_POLL) -> RunView:
        """Waits for a message's turn to start, end (however it ends) and be recorded; returns its run.

        A turn's run exists once the turns before it have ended, and the conversation records the
        turn a moment after its run ends: until then this looks, from every 20 ms to every second.
        """
        if await self._recorded_turns(sent.agent, sent.conversation) > sent.turn:
            return await self._core.get_run(sent.run_id)  # a resent message of a turn long done
        await self.turn_started(sent.run_id, poll=poll)
        run = await self._core.wait(sent.run_id)
        delay, longest = poll
        while await self._recorded_turns(sent.agent, sent.conversation) <= sent.turn:
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, longest)
        return run

    async def _recorded_turns(self, agent: str, conversation: str) -> int:
        if self._core.artifacts is not None:
            head = await ConversationStore(self._core.artifacts).head(agent, conversation)
            return head.turns if head is not None else 0
        return (await self.get(agent, conversation)).turns

    async def turn_started(self, run_id: str, *, poll: tuple[float, float] = TURN_START_POLL) -> None:
        """Returns once the turn's run exists (it may have ended already)."""
        delay, longest = poll
        while True:
            try:
                await self._core.client.get_workflow_handle(run_id).describe()
                return
            except RPCError as error:
                if error.status != RPCStatusCode.NOT_FOUND:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, longest)

    async def get(self, agent: str, conversation: str) -> ConversationView:
        """What the conversation's workflow holds now: turns, the turn under way, the queue, its taint.

        Raises:
            NotFoundError: no such conversation runs.
            UnavailableError: no worker answered (the conversation is there).
        """
        _check_agent(agent)
        check_conversation_id(conversation)
        handle = self._core.client.get_workflow_handle(conversation_workflow_id(agent, conversation))
        try:
            view: ConversationView = await handle.query(
                c.QUERY_CONVERSATION, result_type=ConversationView, rpc_timeout=QUERY_TIMEOUT
            )
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise NotFoundError(f"no conversation {conversation!r} with agent {agent!r}") from None
            if error.status in (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.DEADLINE_EXCEEDED):
                raise UnavailableError(
                    f"no worker answered for conversation {conversation!r} on task queue "
                    f"{self._core.task_queue!r}: start one with `chamvi dev` or `chamvi worker`"
                ) from None
            raise
        return view

    def _conversation_store(self) -> ConversationStore:
        if self._core.artifacts is None:
            raise InvalidInputError(
                "this client has no artifact store to read conversations from: "
                "ChamviClient(..., artifacts=...)"
            )
        return ConversationStore(self._core.artifacts)

    async def messages(
        self, agent: str, conversation: str, *, limit: int = 20, before: int | None = None
    ) -> ConversationPage:
        """A page of the conversation's messages, oldest first: the ``limit`` turns before ``before``.

        Without ``before``, the latest turns, then the messages that wait for (or take) their turn.

        Raises:
            NotFoundError: nothing is stored of the conversation and no workflow runs it.
        """
        _check_agent(agent)
        check_conversation_id(conversation)
        if limit < 1:
            raise InvalidInputError(f"limit must be at least 1, not {limit}")
        store = self._conversation_store()
        head = await store.head(agent, conversation)
        view: ConversationView | None = None
        if before is None:
            try:
                view = await self.get(agent, conversation)
            except NotFoundError:
                view = None
            except (WorkflowQueryFailedError, RPCError, ChamviError):
                view = None  # no worker answers: the stored turns are all there is to show
        if head is None and view is None:
            raise NotFoundError(f"no conversation {conversation!r} with agent {agent!r}")
        stored = head.turns if head is not None else 0
        if view is not None:
            stored = max(stored, view.turns)
        end = min(before, stored) if before is not None else stored
        first = max(0, end - limit)
        records = await store.turns(agent, conversation, first, end) if end > first else []
        messages = [m for record in records for m in _record_messages(record)]
        if view is not None:
            if view.current is not None and view.current.turn >= stored:
                messages.append(_pending_message(view.current, "running"))
            messages.extend(_pending_message(q, "queued") for q in view.queue)
        taint = view.taint if view is not None else head.taint if head is not None else None
        return ConversationPage(
            agent=agent,
            id=conversation,
            turns=stored,
            messages=messages,
            before=first if first > 0 else None,
            taint=taint,
        )

    async def list(self, agent: str, *, limit: int = 20) -> builtins.list[ConversationSummary]:
        """The agent's conversations, latest first, from Temporal's visibility: no worker needed.

        A conversation's workflow lives until it is deleted; each continue-as-new starts a new run of
        it, so the listing shows its running one.
        """
        _check_agent(agent)
        query = (
            f'WorkflowType = "{c.CONVERSATION_WORKFLOW}" AND {c.SA_AGENT.name} = "{agent}" '
            'AND ExecutionStatus = "Running"'
        )
        found: list[ConversationSummary] = []
        async for execution in self._core.client.list_workflows(query, limit=limit):
            found.append(
                ConversationSummary(
                    agent=agent,
                    id=execution.typed_search_attributes.get(c.SA_CONVERSATION)
                    or execution.id.removeprefix(f"{c.CONVERSATION_ID_PREFIX}{agent}:"),
                    workflow_id=execution.id,
                    started_at=execution.start_time,
                )
            )
        return found

    async def delete(self, agent: str, conversation: str) -> int:
        """Forgets a conversation and answers how many Temporal executions were deleted.

        It ends the conversation's workflow (and a turn under way), deletes the executions of the
        conversation and of its turns that visibility lists, and deletes its transcript from the store.

        What stays: executions visibility had not listed yet (a turn started a moment before) until
        Temporal's retention removes them, anything an archival or a log collector copied, and the
        artifacts of the turns' runs (attachments, files tools put), which are the runs' own.

        Raises:
            NotFoundError: nothing is stored of the conversation and no workflow runs it.
        """
        _check_agent(agent)
        check_conversation_id(conversation)
        workflow_id = conversation_workflow_id(agent, conversation)
        handle = self._core.client.get_workflow_handle(workflow_id)
        found = False
        try:
            description = await handle.describe()
            found = True
            if description.status == WorkflowExecutionStatus.RUNNING:
                # its turn under way ends with it (a child's parent-close policy)
                await handle.terminate(reason="conversation deleted")
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
        executions: list[tuple[str, str]] = []
        for query in (
            f'WorkflowId = "{_quote(workflow_id)}"',
            f'WorkflowType = "{c.AGENT_RUN_WORKFLOW}" AND {c.SA_AGENT.name} = "{agent}" '
            f'AND {c.SA_CONVERSATION.name} = "{_quote(conversation)}"',
        ):
            async for execution in self._core.client.list_workflows(query):
                executions.append((execution.id, execution.run_id))
        for execution_id, run_id in executions:
            await self._delete_execution(execution_id, run_id)
        removed = 0
        if self._core.artifacts is not None:
            removed = await ConversationStore(self._core.artifacts).delete(agent, conversation)
        if not found and not executions and not removed:
            raise NotFoundError(f"no conversation {conversation!r} with agent {agent!r}")
        return len(executions)

    async def _delete_execution(self, workflow_id: str, run_id: str) -> None:
        request = DeleteWorkflowExecutionRequest(
            namespace=self._core.client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
        )
        try:
            await self._core.client.workflow_service.delete_workflow_execution(request)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise


__all__ = [
    "Conversations",
    "RunsCore",
    "SentMessage",
    "check_conversation_id",
    "new_conversation_id",
]
