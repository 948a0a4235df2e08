"""Data models shared by workflows, activities, the client and the CLI.

Every workflow and activity takes one input model and returns one result model, so fields can be
added without breaking histories of runs already in flight. Everything here is small: a run's
history must grow linearly with its steps (see ``chamvi._transcript``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from chamvi.errors import ValidationIssue
from chamvi.models.artifacts import Artifact
from chamvi.models.mcp import McpToolHints
from chamvi.models.model_settings import ModelSettings
from chamvi.models.parts import ContentPart, FilePart, ImagePart, ProviderOptions, TextPart
from chamvi.models.recall import ConversationTurn


class RunStatus(StrEnum):
    """Where a run stands; stored in the ``ChamviStatus`` search attribute that ``chamvi runs`` lists."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def settled(self) -> bool:
        """Whether the run has ended, so its view (output, error, usage) is final."""
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class Invoker(BaseModel):
    """Who started a run, as an authenticator resolved it: a snapshot taken at dispatch."""

    id: str
    kind: str
    name: str | None = None
    permissions: list[str] = Field(default_factory=list)


class TriggerEnvelope(BaseModel):
    """Where a run came from; it becomes the run's first user message as a JSON block."""

    trigger: str = "manual"
    channel: str | None = None
    subscription: str | None = None
    address: str | None = None
    payload: Any = None
    invoker: Invoker | None = None
    attachments: list[Artifact] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The files the run was dispatched with, by reference; left out of the JSON when there are
    none, so every step's history stays as small as before attachments existed."""
    event: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The inbound event's type, as its sender names it (``issues``, ``app_mention``); left out of the
    JSON when there is none, so runs from before event types read and replay as they were."""


class RunInput(BaseModel):
    """Input of the ``AgentRun`` workflow; also what ``temporal workflow start --input`` takes."""

    agent: str
    payload: Any = None
    trigger: str = "manual"
    channel: str | None = None
    subscription: str | None = None
    address: str | None = None
    invoker: Invoker | None = None
    idempotency_key: str | None = None
    concurrency_key: str | None = None
    parent_run_id: str | None = None
    """The run whose tool started this one (``ctx.dispatch``)."""
    inherited_taint: str | None = None
    """The parent's taint: a run started by a tainted run is tainted from its start."""
    attachments: list[Artifact] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Stored before the run starts (``ChamviClient.dispatch(attachments=...)``): references only."""
    conversation: ConversationTurn | None = Field(default=None, exclude_if=lambda v: v is None)
    """The run is a turn of a conversation: ``payload`` is the message's text, and the model sees the
    recalled turns before it."""
    event: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The inbound event's type (a channel's delivery), carried to the trigger envelope."""
    model_settings: ModelSettings | None = Field(default=None, exclude_if=lambda v: v is None)
    """This run's own model settings (``dispatch(model_settings=...)``): over the agent's, field by
    field, for each of its model steps; its extractions keep the agent's and their own."""

    def envelope(self) -> TriggerEnvelope:
        """The trigger as the run's first user message and tool policies see it."""
        return TriggerEnvelope(
            trigger=self.trigger,
            channel=self.channel,
            subscription=self.subscription,
            address=self.address,
            payload=self.payload,
            invoker=self.invoker,
            attachments=self.attachments,
            event=self.event,
        )


class ToolCall(BaseModel):
    """One call the model asked for; ``id`` pairs it with the tool message that answers it."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One message, provider-neutral: of a run's transcript, or of an agent's configured instructions.

    A message of content parts (``chamvi.models.parts``: text, images, files) holds them in
    ``parts``, in order, and their text in ``content``, so code that reads a message's text reads it
    there whatever the message holds. ``Message.model_validate({"role": "user", "content": [...]})``
    takes the parts as ``content``, the native form. Messages recorded before parts existed read as
    they were, and one without parts or options is stored as before.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    """The text: the text parts' joined by newlines in a message of parts (None if it has none)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    parts: list[ContentPart] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The content as parts, when it is made of them; providers send these in place of ``content``."""
    provider_options: ProviderOptions = Field(default_factory=dict, exclude_if=lambda v: not v)
    """Per provider name, what it adds to this message (``{"openai": {"name": "example"}}``)."""

    @model_validator(mode="before")
    @classmethod
    def _content_of_parts(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("content"), list):
            if data.get("parts"):
                raise ValueError("give a message's parts as content or as parts, not both")
            data = {**data, "parts": data["content"], "content": None}
        return data

    @model_validator(mode="after")
    def _text_of_parts(self) -> Message:
        if self.parts and self.content is None:
            texts = [p.text for p in self.parts if isinstance(p, TextPart)]
            self.content = "\n".join(texts) if texts else None
        return self

    @property
    def content_parts(self) -> list[TextPart | ImagePart | FilePart]:
        """The content as parts: ``parts``, else the text as one text part (none without content)."""
        if self.parts:
            return list(self.parts)
        return [TextPart(text=self.content)] if self.content else []

    @property
    def media(self) -> list[ImagePart | FilePart]:
        """The image and file parts of the content."""
        return [p for p in self.parts if isinstance(p, ImagePart | FilePart)]


class Usage(BaseModel):
    """Tokens a provider reported; the workflow sums them to enforce ``max_tokens``."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens, the figure a token budget is measured against."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class ErrorInfo(BaseModel):
    """A failure as a run or a step records it: a stable ``code`` from ``chamvi.errors`` and its message.

    ``issues`` are a ``validation_error``'s field-by-field problems, when the check knew them; left
    out of the stored form when there are none, so earlier errors read and write as before.
    """

    code: str
    message: str
    issues: list[ValidationIssue] | None = None

    @model_serializer(mode="wrap")
    def _without_issues(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("issues") is None:
            data.pop("issues", None)
        return data


class BudgetSpec(BaseModel):
    """An agent's budget as the workflow enforces it: steps, tokens and wall-clock time of one run."""

    max_steps: int
    max_tokens: int | None = None
    timeout_seconds: float


class RetrySpec(BaseModel):
    """A Temporal retry policy as data, so an app's choice reaches the workflow through its spec.

    ``maximum_attempts`` 0 means unlimited, as in Temporal. The codes of chamvi's non-retryable errors
    are added when the workflow builds the policy (``chamvi.retry.activity_policy``).
    """

    initial_interval_seconds: float = 1.0
    backoff_coefficient: float = 2.0
    maximum_interval_seconds: float | None = None
    maximum_attempts: int = 0
    non_retryable_error_types: list[str] = Field(default_factory=list)


class ToolSpec(BaseModel):
    """What the workflow needs to know of a tool; its code stays in the worker."""

    name: str
    effect: bool = False
    taint: bool = False
    guard_when_tainted: bool = False
    retry: RetrySpec | None = None
    """The tool's own ``retry=``; None takes the app's tool policy (``AgentSpec.tool_retry``)."""


class AgentSpec(BaseModel):
    """A resolved, serialisable description of an agent, read by the workflow from an activity."""

    name: str
    model: str
    budget: BudgetSpec
    tools: list[ToolSpec] = Field(default_factory=list)
    structured_output: bool = False
    channels: list[str] = Field(default_factory=list)
    untrusted_channels: list[str] = Field(default_factory=list)
    model_timeout_seconds: float = 120.0
    tool_timeout_seconds: float = 300.0
    tool_heartbeat_seconds: float = 30.0
    model_retry: RetrySpec | None = None
    """None (a spec recorded before retry policies were configurable): the default model policy."""
    tool_retry: RetrySpec | None = None
    mcp_servers: list[str] = Field(default_factory=list)
    """The MCP servers whose tools the agent uses; the run lists them once, at its start."""
    classified_tools: list[str] = Field(default_factory=list)
    """The tool names the agent's ``trust=`` classifies; those of MCP tools are checked at listing."""
    skills_version: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The agent's skill catalog version when the run started (``chamvi.skills``): every model and
    tool call of the run reads that version, whatever a later deploy changed; None: no skills."""
    revision: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """A runtime agent's revision, read once when the run starts and recorded with this spec: the
    run's model and tool calls carry it, so they resolve that revision, never a later one. None (left
    out of the JSON) for an agent in code."""


class DescribeAgentRequest(BaseModel):
    """Input of the ``chamvi.describe_agent`` activity: which agent a run needs, seen from which channel."""

    agent: str
    channel: str | None = None
    run_id: str | None = None
    """With ``trigger``, the run a tool factory builds the tool set for (None: no run, e.g. a check)."""
    trigger: TriggerEnvelope | None = None
    model_settings: ModelSettings | None = Field(default=None, exclude_if=lambda v: v is None)
    """A dispatch's own settings, checked against the agent's ``dispatch_settings`` (a check only)."""


class ModelRequest(BaseModel):
    """Input of one model call. The transcript travels as a delta (see ``chamvi._transcript``)."""

    run_id: str
    agent: str
    step: int
    trigger: TriggerEnvelope = Field(default_factory=TriggerEnvelope)
    """Without its payload (the payload is in the transcript); tool policies read the invoker."""
    base_count: int
    base_digest: str
    delta: list[Message]
    skills_version: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The run's skill catalog version (``AgentSpec.skills_version``): the block the model gets."""
    conversation: ConversationTurn | None = Field(default=None, exclude_if=lambda v: v is None)
    """A turn's conversation: the model call puts the recalled turns before the run's transcript."""
    revision: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """The runtime agent's revision the run started on (``AgentSpec.revision``); None: in code."""
    model_settings: ModelSettings | None = Field(default=None, exclude_if=lambda v: v is None)
    """The run's own settings (``RunInput.model_settings``), over the agent's; None: the agent's."""


class _Lean(BaseModel):
    """A result recorded at every step, written without the fields left at None.

    They read back as None all the same, and each step's history stays smaller.
    """

    @model_serializer(mode="wrap")
    def _without_nones(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class ModelResponse(_Lean):
    """Result of the ``chamvi.call_model`` activity: the assistant's message and what the step cost."""

    message: Message
    usage: Usage = Field(default_factory=Usage)
    finish_reason: Literal["stop", "tool_calls", "length", "other", "error", "incomplete"] = "stop"
    """``error``: the stream failed after the model began to write (``message`` holds the text so
    far, ``error`` the failure); ``incomplete``: the stream closed without a finish reason."""
    response_model: str | None = None
    """The model that answered, as the provider names it (``gpt-4.1-mini-2025-04-14``), if it says."""
    response_id: str | None = None
    """The provider's id of the answer (``chatcmpl-...``), if it gives one."""
    output: Any = None
    output_error: str | None = None
    output_issues: list[ValidationIssue] | None = None
    """The field-by-field problems of a final answer that does not match the output schema."""
    error: ErrorInfo | None = None
    model_settings: ModelSettings | None = None
    """The settings the call was made with (the activity's, after the per-call rules); None: none."""


class ApprovalDecision(BaseModel):
    """A person's answer as the workflow hands it to the tool call that asked, on its next attempt."""

    approved: bool
    reason: str | None = None
    approver: Invoker | None = None
    input_digest: str | None = None
    """The input the decision was given for: a call asking again with other arguments asks afresh."""


class ApprovalAnswer(BaseModel):
    """Payload of the ``approve`` signal and the ``answer_approval`` update."""

    approval_id: str
    approved: bool
    reason: str | None = None
    approver: Invoker | None = None

    def decision(self) -> ApprovalDecision:
        """The answer without its approval id, which only the workflow needs to match it to its wait."""
        return ApprovalDecision(approved=self.approved, reason=self.reason, approver=self.approver)


class ApprovalRequest(BaseModel):
    """What a tool call asks a person to decide; the run waits on it for at most ``timeout_seconds``."""

    title: str
    body: str | None = None
    timeout_seconds: float
    index: int | None = None
    """Which ``approve()`` of the call asks (None in runs recorded before decisions were bound)."""
    input: dict[str, Any] | None = None
    """The arguments the tool call had when it asked: shown to the approver whole."""
    input_digest: str | None = None


class ToolRequest(BaseModel):
    """Input of the ``chamvi.call_tool`` activity: one tool call of one step."""

    run_id: str
    agent: str
    step: int
    call: ToolCall
    trigger: TriggerEnvelope
    """Without its payload, which a tool call reads through a query once per run and worker."""
    decisions: list[ApprovalDecision] = Field(default_factory=list)
    tainted: bool = False
    mcp_server: str | None = None
    """The MCP server that listed the called tool for this run; None for the agent's own tools."""
    mcp_hints: McpToolHints | None = Field(default=None, exclude_if=lambda v: v is None)
    """The annotations the run listed with that MCP tool: they set its trust and effect defaults."""
    artifact_count: int = Field(default=0, exclude_if=lambda v: v == 0)
    """Artifacts the run holds before this call: its ``ctx.artifacts.put`` numbers on from here, so
    a call that runs again (a retry after a crash, after an approval) puts under the same ids."""
    skills_version: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The run's skill catalog version (``AgentSpec.skills_version``), which ``skill_load`` reads."""
    approval_waits: int = Field(default=0, exclude_if=lambda v: v == 0)
    """How many approval waits this call has had: the approval it asks next is
    :func:`approval_id` ``(step, call.id, approval_waits)``, which its channel request's token names.
    Left out of the JSON at 0, so a call's first attempt records the same input as before."""
    revision: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """The runtime agent's revision the run started on (``AgentSpec.revision``); None: in code."""


class RunWaitRequest(BaseModel):
    """A tool call waiting for another run's outcome (``ctx.wait_for``), recorded under ``key``."""

    run_id: str
    key: str


class ExtractionRequest(BaseModel):
    """What a tool call needs extracted by a model before it can go on (``extract()``)."""

    key: str
    """The effect key the result is recorded under; the call finds it there when it runs again."""
    output_schema: dict[str, Any]
    content: str
    instructions: str | None = None
    model: str | None = None
    taints: bool = True
    """Whether the result taints the run: its schema is not conservatively constrained."""
    model_settings: ModelSettings | None = None
    """The call's own settings (``extract(model_settings=...)``), over the agent's with its model."""


class ExtractInput(BaseModel):
    """Input of the ``chamvi.extract`` activity: one extraction asked by a tool call of a step.

    The content is read from the run (the ``extraction`` query) by its key: it is in the run's history
    once already, in the tool call's result, and may be long.
    """

    run_id: str
    agent: str
    step: int
    key: str
    revision: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """The runtime agent's revision the run started on (``AgentSpec.revision``); None: in code."""


class ExtractResult(BaseModel):
    """Result of the ``chamvi.extract`` activity: the extracted JSON and what the model call cost."""

    output: Any = None
    usage: Usage = Field(default_factory=Usage)


class ToolResult(_Lean):
    """Result of the ``chamvi.call_tool`` activity.

    ``error`` goes back to the model, ``fatal`` fails the run, ``approval`` makes the run wait for a
    person, ``extraction`` for a model's extraction and ``wait`` for another run before the call runs
    again. ``effects`` and ``taint`` are stored by the workflow.
    """

    status: Literal["ok", "error", "fatal", "approval", "extraction", "wait"]
    output: Any = None
    error: ErrorInfo | None = None
    approval: ApprovalRequest | None = None
    extraction: ExtractionRequest | None = None
    wait: RunWaitRequest | None = None
    effects: dict[str, Any] = Field(default_factory=dict)
    taint: str | None = None
    artifacts: list[Artifact] = Field(default_factory=list, exclude_if=lambda v: not v)
    """What the call put (``ctx.artifacts.put``); the run counts them so the next call numbers on."""


class TranscriptQuery(BaseModel):
    """Argument of the ``transcript`` query: the length of the prefix a model call already has."""

    upto: int


class EffectQuery(BaseModel):
    """Argument of the ``effect`` query: the key under which a tool call kept an effect's result."""

    key: str


class EffectRecord(BaseModel):
    """Answer of the ``effect`` query; ``found`` tells a stored None from a missing key."""

    found: bool
    result: Any = None


class RecordedEffect(BaseModel):
    """Input of the ``effect_recorded`` signal: an effect a tool call applied, recorded before it returns."""

    key: str
    result: Any = None


def approval_id(step: int, tool_call_id: str, wait: int) -> str:
    """The id of a call's ``wait``-th approval wait (from 0): ``<step>:<tool call id>:<wait>``."""
    return f"{step}:{tool_call_id}:{wait}"


class WaitPoint(BaseModel):
    """The approval a run is waiting on, shown in ``RunView.waiting`` until answered or ``until`` passes."""

    approval_id: str
    title: str
    body: str | None = None
    tool: str
    step: int
    until: datetime
    input: dict[str, Any] | None = None
    """The tool call's arguments the decision is for."""


class Taint(BaseModel):
    """When and through what untrusted content first entered a run (a channel or a tool's output)."""

    at: datetime
    source: str


class StepView(BaseModel):
    """One step of a run as ``RunView`` shows it: a model call, a tool call or a wait for approval."""

    index: int
    kind: Literal["llm", "tool", "wait"]
    started_at: datetime
    ended_at: datetime | None = None
    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    tool: str | None = None
    tool_call_id: str | None = None
    input: dict[str, Any] | None = None
    output: Any = None
    error: ErrorInfo | None = None
    approval_id: str | None = None
    decision: ApprovalDecision | None = None
    model: str | None = None
    """A model step's model, as configured (``<provider>/<model id>``); None in runs recorded before."""
    model_settings: ModelSettings | None = None
    """The settings a model step was asked with; None when it had none (and in runs recorded before)."""


class CallInProgress(BaseModel):
    """A model, tool or MCP call the run waits on now: one of its pending activities, as Temporal has it."""

    activity: str
    """The activity's name: ``chamvi.call_tool``, ``chamvi.call_model``, ..."""
    doing: str | None = None
    """What its last heartbeat said it does (``tool 'search' of MCP server 'docs'``)."""
    state: str
    """``scheduled`` (waiting for a worker or its next attempt), ``started`` or ``cancel_requested``."""
    attempt: int
    maximum_attempts: int
    """0: no limit."""
    started_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    last_failure: str | None = None
    """Why the attempt before this one failed."""
    next_attempt_at: datetime | None = None


class RunView(BaseModel):
    """What ``get_run`` returns: the run as its workflow knows it."""

    run_id: str
    agent: str
    status: RunStatus
    trigger: TriggerEnvelope
    concurrency_key: str | None = None
    parent_run_id: str | None = None
    steps: list[StepView] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    output: Any = None
    error: ErrorInfo | None = None
    waiting: WaitPoint | None = None
    taint: Taint | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    conversation: ConversationTurn | None = Field(default=None, exclude_if=lambda v: v is None)
    """Set when the run is a turn of a conversation."""
    calls: list[CallInProgress] = Field(default_factory=list)
    """The calls in progress, from Temporal's pending activities (the client fills it in)."""
    agent_revision: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """The revision of the runtime agent the run runs on, to its end; None for an agent in code."""


class RunSummary(BaseModel):
    """One line of a run listing, read from search attributes (no worker needed)."""

    run_id: str
    agent: str | None
    status: str | None
    channel: str | None = None
    started_at: datetime | None = None
    closed_at: datetime | None = None


class LockRequest(BaseModel):
    """A run asking for, or handing back, the lock of its concurrency key (the lock workflow's signals)."""

    key: str
    run_id: str


class LockState(BaseModel):
    """Carried across continue-as-new by the concurrency lock workflow."""

    key: str
    queue: list[str] = Field(default_factory=list)
    holder: str | None = None


class RunIsOpenRequest(BaseModel):
    """Input of the ``chamvi.run_is_open`` activity: lets the lock free a key whose holder is gone."""

    run_id: str
