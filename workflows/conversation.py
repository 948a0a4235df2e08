"""The ``Conversation`` workflow: one per conversation, the one writer of its transcript.

Messages arrive by the ``send_message`` update, idempotent per message id (a resent id answers the
turn it started). They wait in arrival order and become turns one at a time; each turn is an
ordinary ``AgentRun`` started as a child workflow, so approvals, effects, budgets, taint, streaming
and events work for it as for any run, and the Temporal UI shows the turns under the conversation.
A turn's input carries its recall snapshot (which stored turns and which summary its model sees),
never the messages. When the turn ends, an activity writes it to the conversation store; then the
next message takes its turn.

The transcript lives in the store, not in history: after ``turns_per_run`` turns (or when Temporal
suggests it) the workflow continues as new between turns, carrying its small state (the queue, the
latest turns' sizes, the latest message ids), so its history stays flat however long the
conversation grows. A workflow started with no state reads the stored head first, so it numbers on
from the stored turns.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi._run_details import static_details
    from chamvi.conversations.recall import answer_text, fold_range, recall_window
    from chamvi.errors import InvalidInputError, UnavailableError
    from chamvi.models import ErrorInfo, RunInput, RunStatus, RunView, Usage
    from chamvi.models.conversations import (
        ConversationHead,
        ConversationRequest,
        ConversationSetup,
        ConversationState,
        ConversationView,
        MessageAccepted,
        MessageIn,
        QueuedMessage,
        RecordTurnRequest,
        ReplyRequest,
        SummarizeRequest,
        SummaryRef,
        TurnLookup,
        TurnRecorded,
        turn_run_id,
    )
    from chamvi.models.recall import ConversationTurn, RecallSnapshot
    from chamvi.retry import AGENT_LOOKUP_FAILURES, non_retryable

LOCAL_RETRY = RetryPolicy(maximum_attempts=5, non_retryable_error_types=non_retryable(AGENT_LOOKUP_FAILURES))
STORE_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))
"""Writing a turn is retried until the store takes it: the next turn must not start before."""
STORE_TIMEOUT = timedelta(seconds=10)
"""A few small writes: a worker killed during them is noticed within seconds, not minutes."""
SUMMARY_TIMEOUT = timedelta(seconds=300)
REPLY_TIMEOUT = timedelta(seconds=60)


def _refuse(
    message: str, code: str = InvalidInputError.code, retry_after: timedelta | None = None
) -> ApplicationError:
    """A refused message; ``retry_after`` is when sending it again may succeed (the API's ``Retry-After``)."""
    return ApplicationError(message, type=code, non_retryable=True, next_retry_delay=retry_after)


@workflow.defn(name=c.CONVERSATION_WORKFLOW)
class ConversationWorkflow:
    """One conversation: its queue of messages, its turns one at a time, its continue-as-new."""

    @workflow.init
    def __init__(self, state: ConversationState) -> None:
        self._state = state
        self._seen: dict[str, int] = dict(state.seen)
        """Digest -> turn of the latest message ids, oldest first."""
        self._current: QueuedMessage | None = None
        self._setup: ConversationSetup | None = None
        self._unloadable: ApplicationError | None = None

    # ---- handlers ---------------------------------------------------------------------------

    @workflow.query(name=c.QUERY_CONVERSATION)
    def view(self) -> ConversationView:
        """What the workflow holds now: turns, the turn under way, the queue, taint and summary."""
        state = self._state
        return ConversationView(
            agent=state.agent,
            id=state.id,
            turns=state.turns,
            current=self._current,
            queue=state.queue,
            taint=state.taint,
            summary=state.summary,
            recall=self._setup.recall if self._setup is not None else None,
            created_at=state.created_at,
        )

    @workflow.update(name=c.UPDATE_SEND_MESSAGE)
    async def send_message(self, message: MessageIn) -> MessageAccepted:
        """Queues the message for its turn, or answers the turn its id started before."""
        state = self._state
        # a first message waits for the stored head, so its turn numbers on from the stored turns
        await workflow.wait_condition(lambda: state.loaded or self._unloadable is not None)
        if self._unloadable is not None:  # the agent is unknown (or the store unreadable): say so
            raise self._unloadable
        run_id = turn_run_id(state.agent, state.id, message.message_id)
        digest = _digest(run_id)
        known = self._known(digest)
        if known is None and state.forgot_ids:
            # older than the ids kept in memory: the store knows every recorded turn's message id
            lookup = await workflow.execute_local_activity(
                c.ACTIVITY_CONVERSATION_SEEN,
                ConversationRequest(agent=state.agent, id=state.id, digest=run_id),
                result_type=TurnLookup,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=LOCAL_RETRY,
            )
            known = self._known(digest) if lookup.turn is None else lookup.turn  # or accepted meanwhile
        if known is not None:
            return MessageAccepted(conversation=state.id, run_id=run_id, turn=known, created=False)
        turn = self._next_turn()
        state.queue.append(
            QueuedMessage(message=message, turn=turn, run_id=run_id, received_at=workflow.now())
        )
        self._remember(digest, turn)
        self._show_details()
        return MessageAccepted(conversation=state.id, run_id=run_id, turn=turn, created=True)

    @send_message.validator
    def _validate_message(self, message: MessageIn) -> None:
        # a refused update leaves nothing in history
        message_id = message.message_id
        if not message_id or len(message_id) > c.TRIGGER_KEY_MAX_LENGTH or "\0" in message_id:
            raise _refuse(
                f"message_id {message_id!r} is invalid: use 1-{c.TRIGGER_KEY_MAX_LENGTH} characters "
                "without NUL"
            )
        if not message.text.strip() and not message.attachments:
            raise _refuse("the message is empty: send text, attachments or both")
        if len(message.text) > c.CONVERSATION_MESSAGE_MAX_CHARS:
            raise _refuse(
                f"the message has {len(message.text):,} characters, over the limit of "
                f"{c.CONVERSATION_MESSAGE_MAX_CHARS:,}: send long content as an attachment"
            )
        state = self._state
        limit = state.queue_max
        known = self._known(_digest(turn_run_id(state.agent, state.id, message_id))) is not None
        if len(state.queue) >= limit and not known:  # a resent id answers its turn, full or not
            raise _refuse(
                f"conversation {state.id!r} already has {limit} messages waiting for their turn "
                "(the most it holds): send this one again once the agent has caught up",
                UnavailableError.code,
                timedelta(seconds=c.CONVERSATION_QUEUE_FULL_RETRY_SECONDS),
            )

    def _next_turn(self) -> int:
        state = self._state
        if state.queue:
            return state.queue[-1].turn + 1
        if self._current is not None:
            return self._current.turn + 1
        return state.turns

    def _known(self, digest: str) -> int | None:
        turn = self._seen.get(digest)
        if turn is not None:
            return turn
        return next((q.turn for q in self._state.queue if _digest(q.run_id) == digest), None)

    def _remember(self, digest: str, turn: int) -> None:
        self._seen[digest] = turn
        while len(self._seen) > self._state.remember_ids:
            del self._seen[next(iter(self._seen))]
            self._state.forgot_ids = True

    # ---- run ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, state: ConversationState) -> None:
        """Takes the queued messages' turns, one at a time, for as long as the conversation lives."""
        try:
            setup = await workflow.execute_local_activity(
                c.ACTIVITY_CONVERSATION_LOAD,
                ConversationRequest(agent=state.agent, id=state.id, fresh=not state.loaded),
                result_type=ConversationSetup,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=LOCAL_RETRY,
            )
        except (ActivityError, ApplicationError) as error:
            cause = error.cause if isinstance(error, ActivityError) else error
            self._unloadable = (
                cause
                if isinstance(cause, ApplicationError)
                else ApplicationError(str(cause or error), type="conversation_failed", non_retryable=True)
            )
            # the messages that came with the start are refused with the reason, then the workflow ends
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise self._unloadable from None
        self._setup = setup
        if not state.loaded:
            head = setup.head
            if head is not None and head.turns > state.turns:
                # Temporal forgot the conversation, its store did not: number on, never overwrite
                shift = head.turns - state.turns
                for queued in state.queue:
                    queued.turn += shift
                state.turns, state.taint, state.summary = head.turns, head.taint, head.summary
                state.recent = head.recent
                state.created_at = head.created_at
                state.forgot_ids = True
            state.loaded = True
            if state.created_at is None:
                state.created_at = workflow.now()
        self._show_details()
        turns = 0
        while True:
            await workflow.wait_condition(lambda: bool(state.queue))
            self._current = state.queue.pop(0)
            await self._take_turn(self._current, setup)
            self._current = None
            turns += 1
            self._show_details()
            if turns >= state.turns_per_run or workflow.info().is_continue_as_new_suggested():
                # between turns only: no turn runs, and no update is half handled
                await workflow.wait_condition(workflow.all_handlers_finished)
                state.seen = list(self._seen.items())
                workflow.continue_as_new(state)

    async def _take_turn(self, queued: QueuedMessage, setup: ConversationSetup) -> None:
        state = self._state
        spec = setup.recall
        window = recall_window(queued.turn, state.recent, state.summary, spec)
        if spec.summarizer is not None:
            folding = fold_range(window)
            if folding is not None:
                state.summary = await self._summarize(spec.summarizer, *folding)
                window = recall_window(queued.turn, state.recent, state.summary, spec)
        message = queued.message
        # the conversation's taint before this message: a tainted turn taints every later turn
        inherited = f"conversation:{state.id}" if state.taint is not None else None
        untrusted = message.channel is not None and message.channel in setup.untrusted_channels
        if untrusted and state.taint is None:
            state.taint = f"channel:{message.channel}"
        view, status, error = await self._run_turn(queued, window, inherited)
        recorded = await workflow.execute_activity(
            c.ACTIVITY_CONVERSATION_RECORD_TURN,
            RecordTurnRequest(
                agent=state.agent,
                id=state.id,
                queued=queued,
                status=status,
                output=view.output if view is not None else None,
                error=error,
                taint_known=view is not None,
                tainted=(view is not None and view.taint is not None) or untrusted or inherited is not None,
                usage=view.usage if view is not None else Usage(),
                tool_calls=spec.tool_calls,
                head=self._head(),
            ),
            result_type=TurnRecorded,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary=f"record turn {queued.turn}",
        )
        state.turns = queued.turn + 1
        state.recent = [*state.recent, recorded.stat][-max(spec.max_messages, 1) :]
        if recorded.tainted and state.taint is None:
            state.taint = f"run:{queued.run_id}"
        answer = answer_text(view.output) if view is not None else None
        if message.reply and message.channel is not None and answer is not None:
            try:
                await workflow.execute_activity(
                    c.ACTIVITY_CONVERSATION_REPLY,
                    ReplyRequest(
                        agent=state.agent,
                        id=state.id,
                        turn=queued.turn,
                        run_id=queued.run_id,
                        channel=message.channel,
                        address=message.address,
                        body=answer,
                    ),
                    start_to_close_timeout=REPLY_TIMEOUT,
                    retry_policy=RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=60)),
                    summary=f"reply to turn {queued.turn} through {message.channel}",
                )
            except ActivityError as error:
                # the answer is recorded; a channel that refuses it must not end the conversation
                workflow.logger.warning(
                    "conversation %r: the reply to turn %s through %r failed: %s",
                    state.id,
                    queued.turn,
                    message.channel,
                    error.cause or error,
                )

    async def _run_turn(
        self, queued: QueuedMessage, window: RecallSnapshot, inherited: str | None
    ) -> tuple[RunView | None, RunStatus, ErrorInfo | None]:
        """Runs the turn's ``AgentRun`` to its end; a failed or cancelled run is a turn all the same."""
        state = self._state
        message = queued.message
        run_input = RunInput(
            agent=state.agent,
            payload=message.text,
            trigger=c.CONVERSATION_TRIGGER,
            channel=message.channel,
            subscription=message.subscription,
            address=message.address,
            invoker=message.invoker,
            inherited_taint=inherited,
            attachments=message.attachments,
            conversation=ConversationTurn(
                id=state.id, turn=queued.turn, message_id=message.message_id, recall=window
            ),
        )
        attributes = [
            SearchAttributePair(c.SA_AGENT, state.agent),
            SearchAttributePair(c.SA_STATUS, RunStatus.QUEUED.value),
            SearchAttributePair(c.SA_CONVERSATION, state.id),
        ]
        if message.channel:
            attributes.append(SearchAttributePair(c.SA_CHANNEL, message.channel))
        try:
            view: RunView = await workflow.execute_child_workflow(
                c.AGENT_RUN_WORKFLOW,
                run_input,
                id=queued.run_id,
                task_queue=workflow.info().task_queue,
                result_type=RunView,
                search_attributes=TypedSearchAttributes(attributes),
                static_summary=f"{state.agent}: turn {queued.turn} of conversation {state.id}",
                static_details=static_details(
                    agent=state.agent,
                    trigger=c.CONVERSATION_TRIGGER,
                    channel=message.channel,
                    invoker=message.invoker,
                    run_id=queued.run_id,
                ),
            )
        except WorkflowAlreadyStartedError:
            # the run is there already, running (a message id the store lost track of): it is that turn
            return (
                None,
                RunStatus.FAILED,
                ErrorInfo(code="duplicate", message="the turn's run already exists"),
            )
        except ChildWorkflowError as failure:
            cause = failure.cause
            if isinstance(cause, ApplicationError):
                return None, RunStatus.FAILED, ErrorInfo(code=cause.type or "failed", message=cause.message)
            if isinstance(cause, TemporalTimeoutError):
                return None, RunStatus.FAILED, ErrorInfo(code="timeout", message=str(cause))
            return None, RunStatus.CANCELLED, ErrorInfo(code="cancelled", message=str(cause or failure))
        return view, view.status, view.error

    async def _summarize(self, model: str, first: int, upto: int) -> SummaryRef | None:
        state = self._state
        try:
            summary: SummaryRef = await workflow.execute_activity(
                c.ACTIVITY_CONVERSATION_SUMMARIZE,
                SummarizeRequest(
                    agent=state.agent,
                    id=state.id,
                    model=model,
                    previous=state.summary,
                    first=first,
                    upto=upto,
                ),
                result_type=SummaryRef,
                start_to_close_timeout=SUMMARY_TIMEOUT,
                heartbeat_timeout=timedelta(seconds=20),
                retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=60)),
                summary=f"summarize turns {first}-{upto - 1}",
            )
        except ActivityError as error:
            # the turns drop out of the recall instead; the next fold tries again
            workflow.logger.warning(
                "conversation %r: summary of turns %s-%s failed: %s", state.id, first, upto, error
            )
            return state.summary
        return summary

    # ---- state ----------------------------------------------------------------------------

    def _head(self) -> ConversationHead:
        state = self._state
        return ConversationHead(
            agent=state.agent,
            id=state.id,
            turns=state.turns,
            taint=state.taint,
            summary=state.summary,
            created_at=state.created_at,
            updated_at=workflow.now(),
        )

    def _show_details(self) -> None:
        """The conversation's turns and queue on its page in the Temporal UI (no command)."""
        state = self._state
        lines = [f"**Turns:** {state.turns}", f"**Waiting:** {len(state.queue)}"]
        if self._current is not None:
            lines.append(f"**Turn {self._current.turn}:** `chamvi runs show {self._current.run_id}`")
        if state.taint is not None:
            lines.append(f"**Tainted:** {state.taint}")
        workflow.set_current_details("\n\n".join(lines))


def _digest(run_id: str) -> str:
    return run_id.rsplit("-", 1)[-1]
