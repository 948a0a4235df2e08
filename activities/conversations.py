"""The ``Conversation`` workflow's activities: everything it reads from and writes to the store.

Only these write a conversation's transcript, and only for the conversation's own workflow: the one
writer. The model activity reads what they wrote (``chamvi.conversations.recall``).
"""

from __future__ import annotations

import logging

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus

from chamvi import _constants as c
from chamvi._heartbeat import heartbeating
from chamvi.channels import ChannelMessage, channel_sends
from chamvi.conversations.recall import (
    answer_text,
    estimate_tokens,
    kept_tool_messages,
    summary_message,
    turn_messages,
    turn_stat,
)
from chamvi.conversations.store import ConversationStore, SummaryRecord
from chamvi.models import Message, TranscriptQuery
from chamvi.models.conversations import (
    ConversationRequest,
    ConversationSetup,
    RecordTurnRequest,
    ReplyRequest,
    SummarizeRequest,
    SummaryRef,
    TurnLookup,
    TurnRecord,
    TurnRecorded,
)
from chamvi.providers import ChatRequest
from chamvi.worker_state import AppRuntime

log = logging.getLogger(__name__)

SUMMARIZER_INSTRUCTIONS = (
    "You keep the running summary of a conversation between people and an assistant. Given the "
    "summary so far (if any) and the next messages, write the new summary: the facts, names, numbers, "
    "decisions, open questions and promises a reader needs to carry the conversation on. Plain prose, "
    "at most 300 words, no preamble."
)


class ConversationActivities:
    """Holds the worker's runtime and the conversation store.

    The runtime has the app's models and channels, and its agents in code and defined at runtime.
    """

    def __init__(self, runtime: AppRuntime, store: ConversationStore) -> None:
        self.runtime = runtime
        self.app = runtime.app
        self.store = store

    @activity.defn(name=c.ACTIVITY_CONVERSATION_LOAD)
    async def load(self, request: ConversationRequest) -> ConversationSetup:
        """The agent's recall policy and untrusted channels, and the conversation's stored head.

        An agent defined at runtime (``chamvi.dynamic_agents``) has the default recall policy: a
        definition holds none. Its turns are ordinary runs of its latest revision each.

        Raises:
            AgentNotFoundError: the app serves no such agent, in code or defined at runtime.
        """
        agent = await self.runtime.agents.current(request.agent)
        recall = agent.conversation.spec()
        head = await self.store.head(request.agent, request.id) if request.fresh else None
        if head is not None and head.turns:
            # the recall's bound needs the latest turns' sizes: measured here, never in each head
            first = max(0, head.turns - max(recall.max_messages, 1))
            records = await self.store.turns(request.agent, request.id, first, head.turns)
            head.recent = [turn_stat(r, tool_calls=recall.tool_calls) for r in records]
        return ConversationSetup(
            recall=recall,
            untrusted_channels=[
                ch.name for ch in self.app.channels.values() if getattr(ch, "untrusted", False)
            ],
            head=head,
        )

    @activity.defn(name=c.ACTIVITY_CONVERSATION_SEEN)
    async def seen(self, request: ConversationRequest) -> TurnLookup:
        """The stored turn a message's run id became, if any (``digest`` holds the run id)."""
        assert request.digest is not None
        return TurnLookup(turn=await self.store.seen(request.agent, request.id, request.digest))

    @activity.defn(name=c.ACTIVITY_CONVERSATION_RECORD_TURN)
    async def record_turn(self, request: RecordTurnRequest) -> TurnRecorded:
        """Writes the turn that ended, then the head that counts it (again, the same, on a retry)."""
        queued = request.queued
        message = queued.message
        tainted = request.tainted or (not request.taint_known and await self._run_tainted(queued.run_id))
        tools: list[Message] = []
        if request.tool_calls and request.status != "cancelled":
            tools = kept_tool_messages(await self._transcript(queued.run_id))
        record = TurnRecord(
            turn=queued.turn,
            message_id=message.message_id,
            run_id=queued.run_id,
            text=message.text,
            invoker=message.invoker,
            attachments=message.attachments,
            channel=message.channel,
            address=message.address,
            received_at=queued.received_at,
            ended_at=request.head.updated_at,
            status=request.status,
            answer=answer_text(request.output),
            error=request.error,
            tainted=tainted,
            tools=tools,
            usage=request.usage,
        )
        await self.store.write_turn(request.agent, request.id, record)
        stat = turn_stat(record, tool_calls=request.tool_calls)
        head = request.head.model_copy(
            update={
                "turns": queued.turn + 1,
                "taint": request.head.taint or (f"run:{queued.run_id}" if tainted else None),
            }
        )
        await self.store.write_head(head)
        return TurnRecorded(stat=stat, tainted=tainted)

    async def _run_tainted(self, run_id: str) -> bool:
        """Whether a run that did not complete was tainted, from its search attribute.

        The run sets it before its model sees anything untrusted.
        """
        description = await activity.client().get_workflow_handle(run_id).describe()
        return bool(description.typed_search_attributes.get(c.SA_TAINTED))

    async def _transcript(self, run_id: str) -> list[Message]:
        handle = activity.client().get_workflow_handle(run_id)
        description = await handle.describe()
        if description.status == WorkflowExecutionStatus.TERMINATED:
            return []  # a terminated run answers no query
        transcript: list[Message] = await handle.query(
            c.QUERY_TRANSCRIPT, TranscriptQuery(upto=1_000_000), result_type=list[Message]
        )
        return transcript

    @activity.defn(name=c.ACTIVITY_CONVERSATION_SUMMARIZE)
    async def summarize(self, request: SummarizeRequest) -> SummaryRef:
        """Folds turns ``first`` to ``upto`` (and the summary before them) into a stored summary."""
        previous = (
            await self.store.summary(request.agent, request.id, request.previous.upto)
            if request.previous is not None and request.previous.upto > 0
            else None
        )
        records = await self.store.turns(request.agent, request.id, request.first, request.upto)
        lines = [f"Summary so far:\n{previous.text}\n"] if previous is not None else []
        for record in records:
            for message in turn_messages(record, tool_calls=False):
                lines.append(f"{'Person' if message.role == 'user' else 'Assistant'}: {message.content}")
        model = self.app.models.resolve(request.model)
        async with heartbeating():
            response = await model.complete(
                ChatRequest(
                    run_id=f"{c.CONVERSATION_ID_PREFIX}{request.agent}:{request.id}",
                    agent=request.agent,
                    step=request.upto,
                    messages=[
                        Message(role="system", content=SUMMARIZER_INSTRUCTIONS),
                        Message(role="user", content="\n".join(lines)),
                    ],
                )
            )
        text = (response.message.content or "").strip()
        if not text:
            raise RuntimeError(f"the summarizer {request.model!r} answered no text")  # retried
        await self.store.write_summary(
            request.agent, request.id, SummaryRecord(upto=request.upto, text=text, model=request.model)
        )
        return SummaryRef(upto=request.upto, tokens=estimate_tokens(summary_message(text).content))

    @activity.defn(name=c.ACTIVITY_CONVERSATION_REPLY)
    async def reply(self, request: ReplyRequest) -> None:
        """Sends a turn's answer back through the channel its message came over, once per turn.

        The key is the turn's (``<run id>:reply``), so a receiver can drop a repeat: a worker killed
        after ``out`` returned and before the reply was noted sends it again with the same key.
        """
        channel = self.app.channels.get(request.channel)
        if channel is None or not channel_sends(channel):
            return
        address = request.address or channel.default_address
        if not address:
            log.warning(
                "conversation %r: channel %r has no address for turn %s's reply",
                request.id,
                request.channel,
                request.turn,
            )
            return
        if await self.store.replied(request.agent, request.id, request.turn):
            return
        await channel.out(ChannelMessage(body=request.body, address=address, key=f"{request.run_id}:reply"))
        await self.store.mark_replied(request.agent, request.id, request.turn)
