"""Defining agents: ``define_agent`` checks a definition and fills in the default budget."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from chamvi._constants import DEFAULT_MAX_STEPS, DEFAULT_TIMEOUT, NAME_MAX_LENGTH, SKILL_TOOL_NAMES
from chamvi._names import validate_agent_name as validate_agent_name
from chamvi._provider_objects import is_chat_model
from chamvi.channels import ChannelSubscription
from chamvi.conversations.recall import RecallPolicy, check_recall_policy
from chamvi.errors import ChamviError, ChamviValidationError, InvalidAgentDefinitionError, validation_issues
from chamvi.mcp import McpTools
from chamvi.models import BudgetSpec, DispatchSettings, Message, ModelSettings
from chamvi.permissions import PolicyRun, ToolPolicy
from chamvi.providers import ChatModel
from chamvi.skills.sources import SkillSource, check_source
from chamvi.state import AgentState, check_state
from chamvi.state.tools import state_tools
from chamvi.tool_factory import ToolFactoryContext
from chamvi.tools import Tool, ToolContext, Trust

if TYPE_CHECKING:  # the knowledge package loads Qdrant: imported when an agent has a knowledge folder
    from chamvi.knowledge.agent_folders import AgentKnowledge
    from chamvi.knowledge.sources import Source


@dataclass(frozen=True)
class Budget:
    """Per run: steps (model calls), tokens, and the time one execution may take."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_tokens: int | None = None
    timeout: timedelta = DEFAULT_TIMEOUT

    def spec(self) -> BudgetSpec:
        """The budget as the workflow receives it, with the timeout in seconds so it serialises."""
        return BudgetSpec(
            max_steps=self.max_steps, max_tokens=self.max_tokens, timeout_seconds=self.timeout.total_seconds()
        )


@dataclass(frozen=True)
class ToolCallInfo:
    """The tool call a hook is looking at: which tool, the model's call id, and the input it would get."""

    tool_name: str
    tool_call_id: str
    input: dict[str, Any]


BeforeToolExecution = Callable[[ToolCallInfo, ToolContext], dict[str, Any] | Awaitable[dict[str, Any]]]
AfterToolExecution = Callable[[ToolCallInfo, Any, ToolContext], Any]


@dataclass(frozen=True)
class AgentHooks:
    """Functions run around every tool call of an agent, inside the tool activity.

    ``before`` may rewrite the input, call ``approve()`` or raise ``ToolDeniedError``; ``after`` may
    rewrite the output.
    """

    before_tool_execution: BeforeToolExecution | None = None
    after_tool_execution: AfterToolExecution | None = None


@dataclass(frozen=True)
class AgentTrust:
    """How an agent treats untrusted content, whatever its tools say of themselves.

    Args:
        on_tainted: what a guarded tool call does once the run is tainted: ``"approve"`` asks a person,
            ``"deny"`` refuses it as a tool error and never asks.
        tools: a classification by tool name that replaces the tool's own ``trust=`` (for third-party
            tools, and ``knowledge_search``).
    """

    on_tainted: Literal["approve", "deny"] = "approve"
    tools: Mapping[str, Trust] = field(default_factory=dict)

    def of(self, tool: Tool) -> Trust:
        """The classification this agent gives ``tool``."""
        return self.tools.get(tool.name, tool.trust)


ToolFactory = Callable[[ToolFactoryContext], Sequence[Tool]]
"""Builds a run's tool set from its tool context: ``ctx.run`` (who and where the run comes from, its
trigger without the payload), ``ctx.state``, ``ctx.artifacts``, ``ctx.channels`` and ``inject(ctx, key)``."""


@dataclass(frozen=True)
class RunTools:
    """A run's tools by name, and the configuration (``tools_context``) each third-party one gets."""

    tools: Mapping[str, Tool]
    context: Mapping[str, BaseModel]


@dataclass(frozen=True)
class Agent:
    """An agent as :func:`define_agent` checked it: what the app serves and the worker runs."""

    name: str
    model: str | ChatModel | None
    """A ``<provider>/<model id>`` ref, or a chat model object (see ``chamvi._provider_objects``)."""
    instructions: tuple[Message, ...]
    tools: Mapping[str, Tool]
    budget: Budget
    output: type[BaseModel] | None
    channels: tuple[ChannelSubscription, ...] = field(default_factory=tuple)
    tool_policy: ToolPolicy | None = None
    hooks: AgentHooks = AgentHooks()
    trust: AgentTrust = AgentTrust()
    mcp_servers: tuple[str, ...] = ()
    """The declared MCP servers whose tools the agent uses (``mcp_tools(name)``)."""
    tool_factory: ToolFactory | None = None
    tools_context: Mapping[str, BaseModel] = field(default_factory=dict)
    """Third-party tools' configuration, validated by each tool's ``context_schema``, kept by reference."""
    factory_tools_context: Mapping[str, Any] = field(default_factory=dict)
    """``tools_context`` as given to an agent with a tool factory: checked against what the factory
    builds, for each run (an entry for a tool it does not build fails the run)."""
    state: AgentState = field(default_factory=AgentState)
    """The agent's typed state collections (``ctx.state``); its tools are among ``tools``."""
    model_settings: ModelSettings | None = None
    """How its model is asked to answer (temperature, output tokens, tool choice, ...)."""
    dispatch_settings: DispatchSettings = field(default_factory=DispatchSettings)
    """Which model settings a dispatch may set for one of its runs, and their caps."""
    skills: tuple[SkillSource, ...] = ()
    """The agent's own skill sources, after the App's defaults (``chamvi.skills``)."""
    conversation: RecallPolicy = field(default_factory=RecallPolicy)
    """What a turn of one of the agent's conversations recalls of the turns before it."""
    knowledge: AgentKnowledge | None = None
    """Its own knowledge folder, a collection only it searches (``chamvi.knowledge.agent_folders``)."""
    revision: int | None = None
    """None for an agent in code; the revision of an agent defined at runtime (``chamvi.dynamic_agents``),
    whose ``model`` is then always a ref."""

    def build_tools(self, ctx: ToolFactoryContext) -> RunTools:
        """The run's tools: the agent's own, or what its factory builds for this run.

        Raises:
            InvalidAgentDefinitionError: the factory failed, built something that is not a tool set,
                or ``tools_context`` names a tool it did not build.
            ChamviValidationError: a ``tools_context`` entry does not match its tool's schema.
            ChamviError: what the factory raised of chamvi's own (``inject`` finding no value is
                ``context_not_provided``, an emit is ``invalid_run_state``).
        """
        if self.tool_factory is None:
            return RunTools(self.tools, self.tools_context)
        try:
            built = self.tool_factory(ctx)
        except ChamviError:
            raise
        except Exception as error:
            raise InvalidAgentDefinitionError(
                f"agent {self.name!r}: its tool factory failed for run {ctx.run.run_id!r}: "
                f"{type(error).__name__}: {error}"
            ) from None
        if isinstance(built, Tool) or not isinstance(built, Sequence | Mapping):
            raise InvalidAgentDefinitionError(
                f"agent {self.name!r}: its tool factory must return a list of tools, not {built!r}"
            )
        tools, servers = _tools(self.name, built)
        tools = _with_state_tools(self.name, tools, self.state)
        if servers:
            raise InvalidAgentDefinitionError(
                f"agent {self.name!r}: its tool factory built mcp_tools({servers[0]!r}): name an agent's MCP "
                "servers in tools=[...], not in a factory"
            )
        _check_trust_names(self.name, self.trust, tools, self.mcp_servers)
        return RunTools(tools, _tools_context(self.name, self.factory_tools_context, tools))

    def allows(self, tool: str, run: PolicyRun) -> bool:
        """Whether ``tool_policy`` offers ``tool`` to this run; without a policy every tool is offered."""
        return self.tool_policy is None or self.tool_policy(tool, run)


def _instructions(name: str, instructions: Any) -> tuple[Message, ...]:
    """A string as one system message, or each native message checked for what instructions allow."""
    if isinstance(instructions, str):
        return (Message(role="system", content=instructions),)
    if not isinstance(instructions, Sequence) or not instructions:
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: instructions must be a string or a non-empty list of "
            "system/user/assistant messages"
        )
    messages: list[Message] = []
    for index, item in enumerate(instructions):
        where = f"agent {name!r}: instructions[{index}]"
        try:
            message = item if isinstance(item, Message) else Message.model_validate(item)
        except PydanticValidationError as error:
            raise InvalidAgentDefinitionError(
                f"{where} is not a message: {_problems(error, 'message')}"
            ) from None
        problem = _instruction_problem(message)
        if problem is not None:
            raise InvalidAgentDefinitionError(f"{where} {problem}")
        messages.append(message)
    return tuple(messages)


def _problems(error: PydanticValidationError, whole: str) -> str:
    """A pydantic error as ``field: message`` pairs, without the value (``whole`` names the root)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or whole}: {e['msg']}"
        for e in error.errors(include_input=False)
    )


def _instruction_problem(message: Message) -> str | None:
    """What keeps ``message`` from being an instruction, or None."""
    if message.role not in ("system", "user", "assistant") or message.tool_calls or message.tool_call_id:
        return "must be a system, user or assistant message, without tool calls"
    if not message.content and not message.parts:
        return "has no content: give it text or parts"
    if message.role == "system" and message.parts:
        return "is a system message with parts: a system message's content is a string"
    if message.role == "assistant" and message.media:
        return (
            "is an assistant message with an image or file part: an assistant's parts are text "
            "(give images and files in user messages)"
        )
    return None


def _tools(
    name: str, tools: Sequence[Tool | McpTools] | Mapping[str, Tool]
) -> tuple[dict[str, Tool], tuple[str, ...]]:
    """The agent's own tools by name, and the MCP servers whose tools it uses."""
    items = list(tools.values()) if isinstance(tools, Mapping) else list(tools)
    by_name: dict[str, Tool] = {}
    servers: list[str] = []
    for item in items:
        if isinstance(item, McpTools):
            if item.server in servers:
                raise InvalidAgentDefinitionError(
                    f"agent {name!r}: mcp_tools({item.server!r}) is given twice"
                )
            servers.append(item.server)
            continue
        if not isinstance(item, Tool):
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: {item!r} is not a tool: decorate the function with @tool or @effect_tool"
            )
        if item.name in by_name:
            raise InvalidAgentDefinitionError(f"agent {name!r}: two tools are named {item.name!r}")
        by_name[item.name] = item
    return by_name, tuple(servers)


def _budget(name: str, budget: Budget) -> Budget:
    if not isinstance(budget, Budget):
        raise InvalidAgentDefinitionError(f"agent {name!r}: budget must be a Budget(...)")
    if not isinstance(budget.max_steps, int) or budget.max_steps < 1:
        raise InvalidAgentDefinitionError(f"agent {name!r}: budget.max_steps must be a positive integer")
    if budget.max_tokens is not None and (not isinstance(budget.max_tokens, int) or budget.max_tokens < 1):
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: budget.max_tokens must be a positive integer or None"
        )
    if not isinstance(budget.timeout, timedelta) or budget.timeout <= timedelta(0):
        raise InvalidAgentDefinitionError(f"agent {name!r}: budget.timeout must be a positive timedelta")
    return budget


def _subscriptions(
    name: str, channels: Sequence[str | ChannelSubscription]
) -> tuple[ChannelSubscription, ...]:
    subscriptions = tuple(
        c if isinstance(c, ChannelSubscription) else ChannelSubscription(c) for c in channels
    )
    for subscription in subscriptions:
        if subscription.id is not None and (
            not isinstance(subscription.id, str) or not 0 < len(subscription.id) <= NAME_MAX_LENGTH
        ):
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: subscription id {subscription.id!r} must be 1-{NAME_MAX_LENGTH} characters"
            )
        for part in ("filter", "conversation", "message"):
            if getattr(subscription, part) is not None and not callable(getattr(subscription, part)):
                raise InvalidAgentDefinitionError(
                    f"agent {name!r}: the {part} of its subscription to {subscription.channel!r} must be a "
                    "function of the inbound event"
                )
    ids = [s.id for s in subscriptions if s.id is not None]
    if len(ids) != len(set(ids)):
        raise InvalidAgentDefinitionError(f"agent {name!r}: subscription ids must be unique")
    return subscriptions


def define_agent(
    *,
    name: str,
    instructions: str | Sequence[Message | Mapping[str, Any]],
    model: str | ChatModel | None = None,
    tools: Sequence[Tool | McpTools] | Mapping[str, Tool] | ToolFactory = (),
    budget: Budget | None = None,
    output: type[BaseModel] | None = None,
    channels: Sequence[str | ChannelSubscription] = (),
    tool_policy: ToolPolicy | None = None,
    hooks: AgentHooks | None = None,
    trust: AgentTrust | None = None,
    tools_context: Mapping[str, Any] | None = None,
    state: AgentState | Mapping[str, type[BaseModel]] | None = None,
    model_settings: ModelSettings | Mapping[str, Any] | None = None,
    skills: Sequence[SkillSource] = (),
    conversation: RecallPolicy | None = None,
    knowledge: str | os.PathLike[str] | Source | Sequence[Source] | None = None,
    dispatch_settings: DispatchSettings | Mapping[str, Any] | None = None,
) -> Agent:
    """Checks an agent definition and fills in the default budget (20 steps, 900 s).

    ``instructions`` is a string (one system message) or an ordered list of native messages
    (``Message`` or mappings): system content is a string; user content a string or content parts
    (text, images, files: ``TextPart``, ``ImagePart``, ``FilePart``), assistant content a string or
    text parts; each message and part may carry ``provider_options``. The leading system messages
    are the provider's instructions, the rest come in order before the run's transcript. They are
    rebuilt from the definition for each model call and never enter a run's history.

    ``model`` is a ``<provider>/<model id>`` ref or a chat model object (``chamvi._provider_objects``
    says which ref the App registers it under). ``tools`` holds the agent's own tools and
    , through ``*mcp_tools(name)``, the tools of MCP
    servers the App declares.

    ``tool_policy(tool_name, run)`` decides per run which tools are offered (e.g.
    ``require_tool_permission()``); a refused tool the model calls anyway is a
    ``tool_not_allowed`` tool error. ``trust`` classifies tools by name and says whether a guarded
    call once tainted asks a person or is denied. ``tools_context`` hands third-party tools their
    configuration (an API client's settings, say) by reference, each checked by the tool's
    ``context_schema``; with a tool factory, each run's entries are checked against the tools the
    factory built (one naming a tool it did not build fails the run). ``state`` declares typed
    collections the agent remembers between runs
    (``AgentState(collections={"refunds": Refund})``, or the mapping alone); the model gets each as
    the tools ``state_<name>_list``, ``state_<name>_upsert`` and ``state_<name>_remove``.
    ``model_settings`` (a ``ModelSettings`` or its data) says how the model is asked to answer:
    temperature, output tokens, tool choice and the rest; its ranges, and a tool choice naming a
    tool the agent lacks, are checked here, and what the model's provider supports by the App.
    ``dispatch_settings`` says which of them a dispatch may set for one run, with caps
    (``DispatchSettings(allow={"temperature", "max_output_tokens"}, max_output_tokens=4096)``);
    by default ``temperature``, ``top_p``, ``stop`` and ``seed``, and no more: output tokens,
    reasoning effort, service tier, tool choice and ``extra_body`` are the definition's to set.
    ``skills`` adds the agent's own skill sources (``skills_folder(...)``, ``git_skills(...)``,
    ``skill(...)``) to the App's defaults: the model gets a block listing them after the
    instructions, and the tools ``skill_load`` and ``skill_read`` (``chamvi.skills``).
    ``conversation`` bounds what a turn of one of its conversations recalls of the earlier turns
    (``RecallPolicy(max_messages=..., max_tokens=..., summarizer=...)``; by default the latest 40
    messages within about 8 000 tokens, the rest dropped).
    ``knowledge`` is the agent's own knowledge folder (a path, ``folder(...)`` or a list of
    sources): the App indexes it as the collection ``agent-<name>``, which only this agent
    searches, and its ``knowledge_search`` searches it beside the collections its
    ``knowledge_tools`` name (``docs/knowledge/agent-folders.md``).

    Raises:
        InvalidAgentDefinitionError: naming what is wrong.
    """
    validate_agent_name(name)
    if model is not None and not (isinstance(model, str) and "/" in model) and not is_chat_model(model):
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: model {model!r} must be a '<provider>/<model id>' string or a chat model "
            "object (one with an async complete(request))"
        )
    if output is not None and not (isinstance(output, type) and issubclass(output, BaseModel)):
        raise InvalidAgentDefinitionError(f"agent {name!r}: output must be a pydantic model class or None")
    factory = tools if callable(tools) and not isinstance(tools, Tool) else None
    checked_tools, mcp_servers = ({}, ()) if factory is not None else _tools(name, tools)  # type: ignore[arg-type]
    checked_state = check_state(name, state)
    if factory is None:
        checked_tools = _with_state_tools(name, checked_tools, checked_state)
    own_knowledge = None
    if knowledge is not None:
        if factory is not None:
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: an agent whose tools come from a factory cannot have knowledge= yet: "
                "give it tools=[...], or declare a collection and build knowledge_tools(...) in the factory"
            )
        from chamvi.knowledge.agent_folders import check_agent_knowledge, with_knowledge_tool

        own_knowledge = check_agent_knowledge(name, knowledge)
        checked_tools = with_knowledge_tool(name, checked_tools, own_knowledge)
    return Agent(
        name=name,
        model=model,
        instructions=_instructions(name, instructions),
        tools=checked_tools,
        budget=_budget(name, budget or Budget()),
        output=output,
        channels=_subscriptions(name, channels),
        tool_policy=tool_policy,
        hooks=hooks or AgentHooks(),
        trust=_trust(name, trust or AgentTrust(), checked_tools if factory is None else None, mcp_servers),
        tool_factory=factory,
        mcp_servers=mcp_servers,
        tools_context=_tools_context(name, tools_context or {}, checked_tools) if factory is None else {},
        factory_tools_context=_factory_tools_context(name, tools_context) if factory is not None else {},
        state=checked_state,
        model_settings=_model_settings(
            name, model_settings, None if factory is not None or mcp_servers else set(checked_tools)
        ),
        dispatch_settings=_dispatch_settings(name, dispatch_settings),
        skills=_skills(name, skills),
        conversation=check_recall_policy(name, conversation),
        knowledge=own_knowledge,
    )


def _model_settings(
    name: str, settings: ModelSettings | Mapping[str, Any] | None, tools: set[str] | None
) -> ModelSettings | None:
    """The settings checked: their types, their ranges, and a named tool against ``tools`` when known.

    A factory's and MCP servers' tools are known when a run starts: a named tool is checked then.
    """
    if settings is None:
        return None
    if not isinstance(settings, ModelSettings):
        if not isinstance(settings, Mapping):
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: model_settings must be a ModelSettings(...), not {settings!r}"
            )
        try:
            settings = ModelSettings.model_validate(settings)
        except PydanticValidationError as error:
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: model_settings: {_problems(error, 'value')}"
            ) from None
    found = settings.problems(tools)
    if found:
        raise InvalidAgentDefinitionError(f"agent {name!r}: model_settings: {'; '.join(found)}")
    return None if settings.empty else settings


def _dispatch_settings(name: str, settings: DispatchSettings | Mapping[str, Any] | None) -> DispatchSettings:
    if settings is None or isinstance(settings, DispatchSettings):
        return settings or DispatchSettings()
    if not isinstance(settings, Mapping):
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: dispatch_settings must be a DispatchSettings(...), not {settings!r}"
        )
    try:
        return DispatchSettings.model_validate(settings)
    except PydanticValidationError as error:
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: dispatch_settings: {_problems(error, 'value')}"
        ) from None


def _skills(name: str, skills: Sequence[SkillSource]) -> tuple[SkillSource, ...]:
    if isinstance(skills, str) or not isinstance(skills, Sequence):
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: skills must be a list of skill sources, e.g. [skills_folder('skills')]"
        )
    return tuple(check_source(source, f"agent {name!r}") for source in skills)


def _with_state_tools(name: str, tools: dict[str, Tool], state: AgentState) -> dict[str, Tool]:
    """The agent's tools followed by its state collections' tools; a name taken twice is refused."""
    for made in state_tools(state.collections):
        if made.name in tools:
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: a tool is named {made.name!r}, which its state collection's tool takes: "
                "rename the tool"
            )
        tools[made.name] = made
    return tools


def _factory_tools_context(name: str, values: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A factory agent's ``tools_context``, kept as given: it is checked per run, against what was built."""
    if values is None:
        return {}
    if not isinstance(values, Mapping) or not all(isinstance(k, str) for k in values):
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: tools_context must map tool names to their configuration"
        )
    return dict(values)


def _tools_context(name: str, values: Mapping[str, Any], tools: Mapping[str, Tool]) -> dict[str, BaseModel]:
    """Each entry checked by its tool's schema; a rejection names the fields, never the value."""
    checked: dict[str, BaseModel] = {}
    for tool_name, value in values.items():
        target = tools.get(tool_name)
        if target is None:
            offered = ", ".join(repr(t) for t in tools) or "none"
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: tools_context names {tool_name!r}, which is none of its tools ({offered})"
            )
        if target.is_chamvi_tool or target.context_schema is None:
            why = "a chamvi tool" if target.is_chamvi_tool else "a tool that declares no context_schema"
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: tools_context names {tool_name!r}, {why}: it takes no configuration"
            )
        try:
            checked[tool_name] = target.context_schema.model_validate(value)
        except PydanticValidationError as error:
            raise ChamviValidationError(
                f"agent {name!r}: tools_context for {tool_name!r} does not match its context schema: "
                f"{_problems(error, 'value')}",
                issues=validation_issues(error.errors(include_input=False)),
            ) from None
    return checked


def _trust(
    name: str, trust: AgentTrust, tools: Mapping[str, Tool] | None, mcp_servers: Sequence[str]
) -> AgentTrust:
    """Checks ``trust``, and its tool names against ``tools`` when they are known at definition.

    A factory builds a run's tools, and MCP servers list theirs, when a run starts: checked then.
    """
    if not isinstance(trust, AgentTrust):
        raise InvalidAgentDefinitionError(f"agent {name!r}: trust must be an AgentTrust(...)")
    if trust.on_tainted not in ("approve", "deny"):
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: on_tainted {trust.on_tainted!r} must be 'approve' or 'deny'"
        )
    for tool_name, classification in trust.tools.items():
        if not isinstance(classification, Trust):
            raise InvalidAgentDefinitionError(
                f"agent {name!r}: trust of {tool_name!r} must be a Trust(...), not {classification!r}"
            )
    if tools is not None:
        _check_trust_names(name, trust, tools, mcp_servers)
    return trust


def _check_trust_names(
    name: str, trust: AgentTrust, tools: Mapping[str, Tool], mcp_servers: Sequence[str]
) -> None:
    # the skill tools are the App's to give (its skills or the agent's): it checks those names
    unknown = sorted(set(trust.tools) - set(tools) - set(SKILL_TOOL_NAMES))
    if unknown and not mcp_servers:
        offered = ", ".join(repr(t) for t in tools) or "none"
        raise InvalidAgentDefinitionError(
            f"agent {name!r}: trust names tools it does not have: {', '.join(map(repr, unknown))} "
            f"(its tools are {offered})"
        )
