"""Conversations as data: messages in, the ``Conversation`` workflow's state, stored turns and views.

Pure models and id functions: the workflow, its activities, the client and the API import them.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from chamvi import _constants as c
from chamvi.models.artifacts import Artifact
from chamvi.models.recall import RecallSpec
from chamvi.models.runs import ErrorInfo, Invoker, Message, RunStatus, Usage


def conversation_workflow_id(agent: str, conversation: str) -> str:
    """The ``Conversation`` workflow's id: ``conversation:<agent>:<id>``."""
    return f"{c.CONVERSATION_ID_PREFIX}{agent}:{conversation}"


def message_digest(agent: str, conversation: str, message_id: str) -> str:
    """A message's digest within its conversation: the turn's run id and the dedupe marker use it."""
    key = f"{conversation_workflow_id(agent, conversation)}\0{message_id}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def turn_run_id(agent: str, conversation: str, message_id: str) -> str:
    """The run id of the turn a message starts: derived, so a resent message id is the same turn.

    It has the shape of every run id (``run-<agent>-<32 hex>``), so ``chamvi runs``, the approvals
    page and the Temporal UI treat a turn as the run it is.
    """
    return f"{c.RUN_ID_PREFIX}{agent}-{message_digest(agent, conversation, message_id)}"


class MessageIn(BaseModel):
    """Input of the ``send_message`` update: one message of a person (or of a channel's event)."""

    message_id: str
    text: str
    invoker: Invoker | None = None
    attachments: list[Artifact] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Stored under the turn's run id before the update: its first artifacts, by reference."""
    channel: str | None = None
    """The channel the message came over (an untrusted one taints the turn and the conversation)."""
    address: str | None = None
    subscription: str | None = None
    reply: bool = False
    """Whether the turn's answer goes back through ``channel`` to ``address`` (a routed event)."""


class MessageAccepted(BaseModel):
    """Result of the ``send_message`` update: the turn the message is (or already was)."""

    conversation: str
    run_id: str
    turn: int
    created: bool
    """False: the message id was seen before, and this is the turn it started then."""


class QueuedMessage(BaseModel):
    """A message the workflow accepted, waiting for its turn (or taking it)."""

    message: MessageIn
    turn: int
    run_id: str
    received_at: datetime


class TurnStat(BaseModel):
    """How much one recorded turn weighs in a recall: messages and estimated tokens."""

    turn: int
    messages: int
    tokens: int


class SummaryRef(BaseModel):
    """A stored summary folding every turn before ``upto``."""

    upto: int
    tokens: int


class ConversationHead(BaseModel):
    """The durable part of a conversation's state, stored after every turn.

    A ``Conversation`` workflow that starts with no state (its first message, or after Temporal lost
    it) reads it, so it numbers on from the stored turns and never overwrites one.
    """

    agent: str
    id: str
    turns: int = 0
    taint: str | None = None
    summary: SummaryRef | None = None
    recent: list[TurnStat] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Never stored: ``chamvi.conversation_load`` measures the latest turns when it reads the head."""
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ConversationState(BaseModel):
    """Input of the ``Conversation`` workflow, carried across continue-as-new.

    Small by construction: the queue is bounded (``CONVERSATION_QUEUE_MAX``), ``recent`` by the recall
    policy, ``seen`` by ``CONVERSATION_SEEN_IDS``.
    """

    agent: str
    id: str
    turns: int = 0
    queue: list[QueuedMessage] = Field(default_factory=list)
    recent: list[TurnStat] = Field(default_factory=list)
    summary: SummaryRef | None = None
    taint: str | None = None
    seen: list[tuple[str, int]] = Field(default_factory=list)
    """The latest message ids as (digest, turn) pairs (the digest of ``message_digest``), oldest first."""
    forgot_ids: bool = False
    """Some message ids fell out of ``seen``: an unknown id is looked up in the store."""
    loaded: bool = False
    """The stored head was read (a fresh start reads it once)."""
    created_at: datetime | None = None
    turns_per_run: int = c.CONVERSATION_TURNS_PER_RUN
    """Turns one workflow run takes before it continues as new (fewer in tests)."""
    remember_ids: int = c.CONVERSATION_SEEN_IDS
    """Message ids kept in ``seen`` (fewer in tests)."""
    queue_max: int = Field(
        default=c.CONVERSATION_QUEUE_MAX, exclude_if=lambda v: v == c.CONVERSATION_QUEUE_MAX
    )
    """Messages that may wait at once (fewer in tests); left out of the payload when the default, so
    a conversation's input and continue-as-new carry what they carried before the field existed."""


class TurnRecord(BaseModel):
    """One turn as the conversation store keeps it, written once by the ``Conversation`` workflow."""

    turn: int
    message_id: str
    run_id: str
    text: str
    invoker: Invoker | None = None
    attachments: list[Artifact] = Field(default_factory=list)
    channel: str | None = None
    address: str | None = None
    received_at: datetime
    ended_at: datetime | None = None
    status: RunStatus
    answer: str | None = None
    """The agent's final answer (structured output as JSON text); None when the turn did not complete."""
    error: ErrorInfo | None = None
    tainted: bool = False
    tools: list[Message] = Field(default_factory=list)
    """The turn's tool calls and results, kept when the agent's policy says ``tool_calls=True``."""
    usage: Usage = Field(default_factory=Usage)


class RecordTurnRequest(BaseModel):
    """Input of ``chamvi.conversation_record_turn``: a turn that ended, and the head before it."""

    agent: str
    id: str
    queued: QueuedMessage
    status: RunStatus
    output: Any = None
    error: ErrorInfo | None = None
    taint_known: bool = True
    """False when the run failed and its taint must be read from the run itself."""
    tainted: bool = False
    usage: Usage = Field(default_factory=Usage)
    tool_calls: bool = False
    head: ConversationHead


class TurnRecorded(BaseModel):
    """Result of ``chamvi.conversation_record_turn``."""

    stat: TurnStat
    tainted: bool


class ConversationRequest(BaseModel):
    """Input of the activities that read a conversation's store by name."""

    agent: str
    id: str
    digest: str | None = None
    fresh: bool = True
    """For ``chamvi.conversation_load``: the workflow starts without state, so it needs the stored head."""


class TurnLookup(BaseModel):
    """Result of ``chamvi.conversation_seen``: the turn a message id became, if it is stored."""

    turn: int | None = None


class ConversationSetup(BaseModel):
    """Result of ``chamvi.conversation_load``: the agent's recall policy and untrusted channels.

    ``head`` is the conversation's stored head (None: nothing stored yet).
    """

    recall: RecallSpec
    untrusted_channels: list[str] = Field(default_factory=list)
    head: ConversationHead | None = None


class SummarizeRequest(BaseModel):
    """Input of ``chamvi.conversation_summarize``: fold turns ``first`` to ``upto`` into the summary."""

    agent: str
    id: str
    model: str
    previous: SummaryRef | None = None
    first: int
    upto: int


class ReplyRequest(BaseModel):
    """Input of ``chamvi.conversation_reply``: a turn's answer back through the channel it came from."""

    agent: str
    id: str
    turn: int
    run_id: str
    channel: str
    address: str | None = None
    body: str


class ConversationView(BaseModel):
    """Answer of the ``conversation`` query: what the workflow holds now."""

    agent: str
    id: str
    turns: int
    """Turns recorded so far."""
    current: QueuedMessage | None = None
    queue: list[QueuedMessage] = Field(default_factory=list)
    taint: str | None = None
    summary: SummaryRef | None = None
    recall: RecallSpec | None = None
    created_at: datetime | None = None


class ConversationMessage(BaseModel):
    """One message of a conversation as people read it (``client.conversations.messages``)."""

    turn: int
    role: str
    """``user`` or ``assistant``."""
    text: str | None
    run_id: str
    message_id: str
    at: datetime | None = None
    invoker: Invoker | None = None
    status: str
    """The turn's: ``queued``, ``running`` (under way), ``completed``, ``failed``, ``cancelled``."""
    error: ErrorInfo | None = None
    attachments: list[Artifact] = Field(default_factory=list)


class ConversationPage(BaseModel):
    """A page of a conversation's messages, oldest first, and what comes before it."""

    agent: str
    id: str
    turns: int
    messages: list[ConversationMessage]
    before: int | None = None
    """Pass as ``before`` for the previous page; None at the conversation's start."""
    taint: str | None = None


class ConversationSummary(BaseModel):
    """One conversation in a listing, from Temporal's visibility (no worker needed)."""

    agent: str
    id: str
    workflow_id: str
    started_at: datetime | None = None
    """When its current workflow run started (a continue-as-new starts a new one)."""
