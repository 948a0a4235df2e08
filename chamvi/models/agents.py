"""Agents defined at runtime, as data: what a put carries, what the store keeps, what a listing shows.

A runtime agent is made of data only (the seed's ``putAgent``): a model ref, instructions, tools named
from the catalog the App declares (``App(runtime_tools=[...])``), a budget, a tool policy and trust
overrides. Code (tools, hooks, factories, output types, state types) stays in the App; the data picks
from it. ``chamvi.dynamic_agents`` checks a definition against the App and builds the agent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from chamvi._constants import (
    AGENT_DESCRIPTION_MAX_LENGTH,
    APPROVAL_TIMEOUT_MAX,
    DEFAULT_MAX_STEPS,
    DEFAULT_TIMEOUT,
    RUNTIME_AGENT_MAX_STEPS,
)
from chamvi.models.model_settings import DispatchSettings, ModelSettings
from chamvi.models.runs import Invoker


class _Data(BaseModel):
    """A part of a definition: an unknown field is refused, so a typo never passes for a default."""

    model_config = ConfigDict(extra="forbid")


class InstructionMessage(_Data):
    """One message of structured instructions: a system, user or assistant message with text."""

    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


def _instructions_kind(value: Any) -> str:
    return "messages" if isinstance(value, list) else "text"


INSTRUCTION_KINDS = ("text", "messages")
"""The tags of the two forms of instructions, which a validation issue's path names after
``instructions`` (``chamvi.dynamic_agents`` takes them out: ``instructions.0.role``)."""

Instructions = Annotated[
    Annotated[str, Tag("text"), Field(min_length=1)]
    | Annotated[list[InstructionMessage], Tag("messages"), Field(min_length=1)],
    Discriminator(_instructions_kind),
]
"""Text (one system message), or system/user/assistant text messages in order."""


class BudgetData(_Data):
    """The budget of a run: steps (model calls), tokens, and the time one execution may take.

    The timeout is bounded like an approval's (about 24.8 days): a larger timer is a mistake.
    """

    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=RUNTIME_AGENT_MAX_STEPS)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_seconds: float = Field(
        default=DEFAULT_TIMEOUT.total_seconds(), gt=0, le=APPROVAL_TIMEOUT_MAX.total_seconds()
    )


class ToolPolicyData(_Data):
    """``require_tool_permission()`` as data.

    With ``require_permission``, a tool is offered only when the run's invoker holds
    ``tool:<agent>:<tool>``; ``without_invoker`` says what runs without one (cron, webhooks) get.
    """

    require_permission: bool = True
    without_invoker: Literal["deny", "allow"] = "deny"


class TrustOverride(_Data):
    """What an agent adds to a tool's own trust: ``true`` adds, ``false`` keeps what the code says.

    Data never weakens code: a tool its author marked as tainting or guarded stays so.
    """

    taint: bool = False
    guard_when_tainted: bool = False


class TrustData(_Data):
    """How the agent treats untrusted content (``AgentTrust`` as data)."""

    on_tainted: Literal["approve", "deny"] = "approve"
    tools: dict[str, TrustOverride] = Field(default_factory=dict)


class AgentDefinition(_Data):
    """A runtime agent as data: the body of ``PUT /agents/{name}``, of ``chamvi agents put FILE``.

    Attributes:
        name: optional in a body (the path or the command names the agent); when given it must be
            that name.
        description: for people, shown by ``GET /agents`` and ``chamvi agents list``.
        model: a ``<provider>/<model id>`` ref the App's registry resolves; none: the App's default.
        instructions: text (one system message), or system/user/assistant messages in order.
        tools: names from the App's ``runtime_tools``.
        mcp_servers: MCP servers whose ``mcp_tools(name)`` the App's ``runtime_tools`` holds.
        budget: steps, tokens and timeout of one run.
        tool_policy: ``require_tool_permission()`` as data; none: every tool is offered.
        trust: ``on_tainted``, and what the agent adds to its tools' own classification (with the
            App's skills, ``skill_load`` and ``skill_read`` too).
        model_settings: how the model is asked to answer (``ModelSettings`` as data: temperature,
            tool choice as ``"required"`` or ``{"tool": "search"}``, ...), checked as ``define_agent``
            checks them and against what the model's provider supports.
        dispatch_settings: which model settings a dispatch may set for a run, with caps
            (``DispatchSettings`` as data); none: temperature, top_p, stop and seed.

    A runtime agent has the App's default skills (``App(skills=[...])``); a ``skills`` field is refused,
    and so is a ``knowledge`` field (an agent's own knowledge folder is declared in code).
    """

    name: str | None = None
    description: str | None = Field(default=None, max_length=AGENT_DESCRIPTION_MAX_LENGTH)
    model: str | None = None
    instructions: Instructions
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[str] = Field(default_factory=list)
    budget: BudgetData = Field(default_factory=BudgetData)
    tool_policy: ToolPolicyData | None = None
    trust: TrustData = Field(default_factory=TrustData)
    model_settings: ModelSettings | None = None
    # left out when unset, so definitions stored before it keep their stored form
    dispatch_settings: DispatchSettings | None = Field(default=None, exclude_if=lambda v: v is None)


class AgentRevision(BaseModel):
    """One stored revision of a runtime agent: immutable once written.

    Attributes:
        name: the agent.
        revision: 1, 2, 3 ...: never reused, also across a remove.
        definition: what the put carried (its ``name`` set); None: this revision removed the agent.
        created_at: when it was written (the writer's clock).
        by: who wrote it (an HTTP token's principal), without permissions.
        request_id: the write's own id (the registry workflow's), so a retried remove finds itself.
    """

    name: str
    revision: int
    definition: AgentDefinition | None = None
    created_at: datetime
    by: Invoker | None = None
    request_id: str | None = None

    @property
    def removed(self) -> bool:
        """Whether this revision removed the agent (new runs of it are refused)."""
        return self.definition is None


class AgentInfo(BaseModel):
    """An agent as ``GET /agents`` and ``chamvi agents list`` show it: in code, or defined at runtime.

    Attributes:
        name: the agent.
        kind: ``code`` (in the App) or ``runtime`` (put as data).
        revision: a runtime agent's latest revision; None for a code agent.
        model: the model ref it runs on.
        tools: the names of its own tools (a code agent's factory builds its per run: none here).
        mcp_servers: the MCP servers whose tools it uses.
        description: a runtime agent's description.
        created_at: when its latest revision was written.
        by: who wrote it.
        definition: a runtime agent's data, as stored (``GET /agents/{name}``, ``chamvi agents show``).
    """

    name: str
    kind: Literal["code", "runtime"]
    revision: int | None = None
    model: str | None = None
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[str] = Field(default_factory=list)
    description: str | None = None
    created_at: datetime | None = None
    by: Invoker | None = None
    definition: AgentDefinition | None = None


class AgentPutResult(BaseModel):
    """What a put answers: the agent at its latest revision, and whether the put made it available.

    ``created`` is true for a name that had no live revision (new, or removed before): 201 over HTTP.
    ``changed`` is false when the definition equals the latest revision's: nothing was written.
    """

    agent: AgentInfo
    created: bool
    changed: bool = True


class AgentRegistryRequest(BaseModel):
    """Input of the ``AgentRegistry`` workflow and its activity: one operation on the agents.

    A client without the App (the CLI, your own code) asks a worker, which holds the App's tool
    catalog and model registry to check a definition against, and the revision store.
    """

    action: Literal["put", "remove", "get", "list"]
    name: str | None = None
    definition: dict[str, Any] | None = None
    """The data as sent: the worker validates it, so a refusal names each field (``issues``)."""
    by: Invoker | None = None
    request_id: str | None = None
    """The workflow's id: a remove retried after it was written finds its own revision."""
    revision: int | None = None
    """For ``get``: that revision rather than the latest."""


class AgentRegistryResult(BaseModel):
    """Result of the ``AgentRegistry`` workflow: the put's, the removal's revision, an agent, a listing."""

    put: AgentPutResult | None = None
    removed_revision: int | None = None
    agent: AgentInfo | None = None
    agents: list[AgentInfo] = Field(default_factory=list)
