"""``App``: the agents, models and channels a worker serves, checked once at construction.

An App is a definition only: what the user declared. What a worker holds while it serves it (the
state store, the knowledge searcher, the event hub, the tool sets its factories built) lives in that
worker's :class:`chamvi.worker_state.AppRuntime`, so two workers built from one App share nothing by
accident.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar, Unpack

from chamvi._constants import SKILL_TOOL_NAMES
from chamvi._on_error import ErrorHook, OnError
from chamvi._provider_objects import chat_ref, embedder_ref, is_chat_model
from chamvi.agents import Agent
from chamvi.channels import Channel, validate_channel_name
from chamvi.context import ContextKey, Provided
from chamvi.errors import (
    AgentNotFoundError,
    InvalidAgentDefinitionError,
    InvalidAppError,
    InvalidScheduleError,
    ModelNotFoundError,
)
from chamvi.knowledge.agent_folders import refuse_others
from chamvi.knowledge.collections import KnowledgeCollection, ManagedRoutes, knowledge_collection
from chamvi.knowledge.embedders import (
    DEFAULT_EMBEDDING_MODEL,
    Embedder,
    EmbeddingRegistry,
    default_embedding_registry,
)
from chamvi.mcp import McpServer, McpTools
from chamvi.models import AgentSpec, ToolSpec
from chamvi.providers import ChatModel, ModelRegistry, NamedProvider, default_registry
from chamvi.providers._base import refused_settings
from chamvi.providers._registry import environment_registry
from chamvi.retry import RetryPolicies, retry_spec
from chamvi.run_events import Listener, Listeners
from chamvi.schedules import AgentSchedule, ScheduleOptions, define_schedule
from chamvi.skills.limits import SkillLimits
from chamvi.skills.sources import SkillSource, check_source
from chamvi.skills.tools import SKILL_TOOLS
from chamvi.tools import Tool

T = TypeVar("T")


@dataclass(frozen=True)
class ActivityTimeouts:
    """How long one model or tool call may take, and how soon a killed worker's tool call is retried."""

    model: timedelta = timedelta(seconds=120)
    tool: timedelta = timedelta(seconds=300)
    tool_heartbeat: timedelta = timedelta(seconds=30)


class App:
    """What a worker serves.

    Args:
        agents: the agents, unique by name.
        model: the model of agents that name none: a ref, or a chat model object.
        models: more providers, on top of ``openai/...``, ``anthropic/...`` and ``local/...``:
            named providers (``openai_compatible("ollama", base_url=...)``, ``AnthropicProvider``)
            and registries of providers or exact model refs (scripted models in tests), in a list,
            or one ``ModelRegistry``. The entries of ``CHAMVI_PROVIDERS`` are added last: one
            replaces a provider of the same name given here.
        channels: channels by unique name; agents subscribe to them and tools send through them.
        timeouts: activity timeouts.
        collections: knowledge collections, declared with ``knowledge_collection(...)``. An agent's
            own knowledge folder (``define_agent(knowledge=...)``) adds the collection
            ``agent-<name>``, embedded by ``embedding_model`` (else ``local/all-minilm-l6-v2``).
        embedders: extra embedding providers or exact refs (test embedders), on top of
            ``openai/...``, ``fastembed/...`` and ``local/...``.
        embedding_model: the managed collections' model (``CHAMVI_KNOWLEDGE_MODEL`` wins over it):
            a ref, or an embedding model object (known by its ``ref``). Wherever a model is given as
            an object, the App registers it under a ref the workflow sees instead
            (``chamvi._provider_objects``).
        retry: how model, tool and embedding calls are retried (Temporal retry policies); the
            defaults retry a model call 10 times and a tool call 10 times, and leave a failed
            embedding call to the collection's backoff.
        mcp_servers: MCP servers, declared with ``mcp_server(...)``, unique by name; agents use
            their tools through ``mcp_tools(name)``.
        start_channels: whether workers start the receiving channels (those with ``start(ctx)``);
            off, runs come only from dispatches and schedules, and still send through every
            channel's ``out`` (the seed's ``start({ channels: false })``). A worker's
            ``ChamviPlugin(start_channels=...)`` or ``CHAMVI_NO_CHANNELS=true`` overrides it.
        schedules: agent schedules, declared with ``define_schedule(agent, cron=... | every=...)``,
            unique by id; every worker's start creates or updates them (see :meth:`schedule`).
        managed: how the HTTP API serves managed collections: on or off, where, and their body
            limit (:class:`~chamvi.knowledge.collections.ManagedRoutes`); ``chamvi api``/``dev``
            options and ``CHAMVI_KNOWLEDGE_*`` variables override it.
        on_error: ``on_error(error, run_id)``, called with each error that has no caller to throw
            to (a :class:`~chamvi.errors.BackgroundError`: a channel that failed to start or stop, a
            run event listener that raised, a failed sync of the schedules or the collections, a
            failed knowledge pass); by default each is logged (see ``chamvi._on_error``). Every
            worker built from the App reports to it.
        skills: skill sources every agent has (``skills_folder(...)``, ``git_skills(...)``,
            ``skill(...)``, ``define_skill_source(...)``); an agent's own ``skills=`` add to them.
            Loaded at each worker's boot, where a bad skill fails it (``chamvi.skills``).
        skill_limits: how large one skill and one agent's skills may be (``SkillLimits``).
        runtime_tools: the tools agents defined at runtime may name (``put_agent``, ``PUT
            /agents/{name}``, ``chamvi agents put``): tools, and ``*mcp_tools(name)`` of declared MCP
            servers. The code stays here; a runtime agent's data picks from it by name. None by
            default: a runtime agent then has no tools (see ``chamvi.dynamic_agents``).

    Raises:
        InvalidAppError, InvalidAgentDefinitionError: the boot fails, naming the problem.
        InvalidScheduleError, AgentNotFoundError: a schedule is malformed, names an agent the app
            does not serve, or takes an id another one has.
    """

    def __init__(
        self,
        *,
        agents: Sequence[Agent],
        model: str | ChatModel | None = None,
        models: ModelRegistry | Sequence[ModelRegistry | NamedProvider] | None = None,
        channels: Sequence[Channel] = (),
        timeouts: ActivityTimeouts | None = None,
        collections: Sequence[KnowledgeCollection] = (),
        embedders: EmbeddingRegistry | None = None,
        embedding_model: str | Embedder | None = None,
        retry: RetryPolicies | None = None,
        mcp_servers: Sequence[McpServer] = (),
        start_channels: bool = True,
        schedules: Sequence[AgentSchedule] = (),
        managed: ManagedRoutes | None = None,
        on_error: OnError | None = None,
        skills: Sequence[SkillSource] = (),
        skill_limits: SkillLimits | None = None,
        runtime_tools: Sequence[Tool | McpTools] = (),
    ) -> None:
        self.start_channels = start_channels
        if isinstance(skills, str) or not isinstance(skills, Sequence):
            raise InvalidAppError("skills must be a list of skill sources, e.g. [skills_folder('skills')]")
        self.skills: tuple[SkillSource, ...] = tuple(check_source(s, "App(skills=...)") for s in skills)
        if skill_limits is not None and not isinstance(skill_limits, SkillLimits):
            raise InvalidAppError(f"skill_limits={skill_limits!r} is not a SkillLimits(...)")
        self.skill_limits = skill_limits or SkillLimits()
        self._tools: dict[str, Mapping[str, Tool]] = {}
        """Each agent's own tools and, when it has skills, the skill tools: what its runs offer."""
        if managed is not None and not isinstance(managed, ManagedRoutes):
            raise InvalidAppError(f"managed={managed!r} is not a ManagedRoutes(enabled=, base_path=, ...)")
        self.managed = managed or ManagedRoutes()
        self.models = default_registry().merged(_registry(models)).merged(environment_registry())
        self._chat_objects: dict[str, ChatModel] = {}
        self._embedder_objects: dict[str, Embedder] = {}
        self._model_refs: dict[str, str] = {}
        """Each agent's model ref, its own or the App's, as the workflow sees it."""
        self.model = self._chat_ref(model) if model is not None else None
        """The default model's ref (an object's registered one)."""
        self.timeouts = timeouts or ActivityTimeouts()
        self.retry = retry or RetryPolicies()
        self.provided = Provided()
        """The values given with :meth:`provide`; a worker's runtime reads them by reference."""
        self.listeners = Listeners()
        """The run event listeners declared with :meth:`on`; each worker's event hub calls them."""
        self.errors = ErrorHook(on_error)
        """Where errors with no caller go: ``on_error``, else the log; every worker's reports here."""
        self.channels: dict[str, Channel] = {}
        for channel in channels:
            validate_channel_name(channel.name)
            if channel.name in self.channels:
                raise InvalidAppError(f"two channels are named {channel.name!r}")
            self.channels[channel.name] = channel
        self.embedders = (
            default_embedding_registry().merged(embedders)
            if embedders is not None
            else default_embedding_registry()
        )
        self.embedding_model = (
            self._embedding_ref("embedding_model", embedding_model) if embedding_model is not None else None
        )
        if self.embedding_model is not None:
            self._check_embedding_model("embedding_model", self.embedding_model)
        self.collections: dict[str, KnowledgeCollection] = {}
        """Every collection workers index: the declared ones, then the agents' own knowledge folders."""
        self.collection_owners: dict[str, str] = {}
        """Each agent knowledge folder's collection, and the one agent that searches it."""
        for collection in collections:
            self._check_collection(collection)
            self.collections[collection.name] = collection
        self.mcp_servers: dict[str, McpServer] = {}
        for server in mcp_servers:
            if not isinstance(server, McpServer):
                raise InvalidAppError(f"{server!r} is not an MCP server: declare it with mcp_server(...)")
            if server.name in self.mcp_servers:
                raise InvalidAppError(f"two MCP servers are named {server.name!r}")
            self.mcp_servers[server.name] = server
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if not isinstance(agent, Agent):
                raise InvalidAppError(f"{agent!r} is not an agent: build it with define_agent(...)")
            if agent.name in self.agents:
                raise InvalidAppError(f"two agents are named {agent.name!r}")
            self._check_agent(agent)
            self.agents[agent.name] = agent
            self._add_agent_knowledge(agent)
        for agent in self.agents.values():
            refuse_others(f"agent {agent.name!r}", agent.tools, self.collection_owners, agent.name)
        self.schedules: dict[str, AgentSchedule] = {}
        for declared in schedules:
            self._add_schedule(declared)
        self.runtime_tools: dict[str, Tool] = {}
        """The tools runtime agents may name, by name."""
        self.runtime_mcp_servers: tuple[str, ...] = ()
        """The MCP servers whose tools runtime agents may use."""
        self._add_runtime_tools(runtime_tools)

    def _add_runtime_tools(self, catalog: Sequence[Tool | McpTools]) -> None:
        if isinstance(catalog, Tool | McpTools) or not isinstance(catalog, Sequence):
            raise InvalidAppError("runtime_tools must be a list of tools and mcp_tools(...)")
        servers: list[str] = []
        for item in catalog:
            if isinstance(item, McpTools):
                if item.server not in self.mcp_servers:
                    known = ", ".join(repr(s) for s in self.mcp_servers) or "none"
                    raise InvalidAppError(
                        f"runtime_tools holds mcp_tools({item.server!r}), which the App does not declare: "
                        f"declared MCP servers are {known}"
                    )
                if item.server in servers:
                    raise InvalidAppError(f"runtime_tools holds mcp_tools({item.server!r}) twice")
                servers.append(item.server)
                continue
            if not isinstance(item, Tool):
                raise InvalidAppError(
                    f"runtime_tools holds {item!r}, which is not a tool: decorate the function with @tool "
                    "or @effect_tool"
                )
            if item.name in self.runtime_tools:
                raise InvalidAppError(f"runtime_tools holds two tools named {item.name!r}")
            if self.skills and item.name in SKILL_TOOLS:
                raise InvalidAppError(
                    f"runtime_tools holds a tool named {item.name!r}, the name of a skill tool runtime "
                    "agents get with the App's skills: rename the tool"
                )
            self.runtime_tools[item.name] = item
        refuse_others("runtime_tools", self.runtime_tools, self.collection_owners)
        self.runtime_mcp_servers = tuple(servers)

    def schedule(self, agent: str, **options: Unpack[ScheduleOptions]) -> AgentSchedule:
        """Declares a Temporal Schedule that runs ``agent``, as ``App(schedules=[...])`` does.

        ``app.schedule("digest", cron="0 8 * * *", payload={...}, overlap="skip", id="daily-digest")``
        is ``App(..., schedules=[define_schedule("digest", cron=...)])`` written after the App: a pure
        declaration, which starts nothing. Every worker's start creates or updates the declared
        schedules, so declare them before the workers start (at import, beside the App). Exactly one
        of ``cron`` and ``every`` (the options are :class:`chamvi.schedules.ScheduleOptions`). Each fire
        dispatches an ordinary run whose idempotency key is the schedule id and the fire time. A
        schedule the code stops declaring is deleted by the next worker that starts.

        Returns:
            The validated schedule.

        Raises:
            AgentNotFoundError: the app serves no such agent.
            InvalidScheduleError: both or neither of cron and every, a bad cron, interval, overlap,
                zone or id, or an id declared twice.
        """
        return self._add_schedule(define_schedule(agent, **options))

    def _add_schedule(self, declared: AgentSchedule) -> AgentSchedule:
        if not isinstance(declared, AgentSchedule):
            raise InvalidScheduleError(
                f"{declared!r} is not a schedule: declare it with define_schedule(agent, cron=...) "
                "or define_schedule(agent, every=...)"
            )
        self.agent(declared.agent)
        if declared.id in self.schedules:
            raise InvalidScheduleError(f"two schedules have the id {declared.id!r}: give one another id=")
        self.schedules[declared.id] = declared
        return declared

    def on(self, event_type: str, listener: Listener) -> Callable[[], None]:
        """Calls ``listener(event)`` for each run event of ``event_type`` a worker of this app sees.

        A declaration: every worker built from the app calls its listeners (through its own event
        hub), a worker built before the call included. ``run.delta`` (the model's text and reasoning
        while it writes, never stored) reaches the
        listeners of the worker process that makes the model call. The other types reach the
        listeners of the worker process that started the run, each once, read from the run's
        history as it grows; a run that process no longer serves (it stopped) is heard no more
        there. From any process, ``ChamviClient.events(run_id)`` reads every event of a run.

        Args:
            event_type: one of ``chamvi.run_events.EVENT_TYPES``, or ``"*"`` for all.
            listener: a function or coroutine function; its errors go to ``on_error`` (else the
                log), never raised.

        Returns:
            A function that removes the listener.

        Raises:
            InvalidInputError: ``event_type`` is no event type.
        """
        return self.listeners.on(event_type, listener)

    def provide(self, key: ContextKey[T], value: T) -> None:
        """Gives tools a shared instance under ``key`` (read with ``inject(ctx, key)``); once per key."""
        self.provided.provide(key, value)

    def _chat_ref(self, model: str | ChatModel) -> str:
        """``model``'s ref; an object is registered under the one ``chat_ref`` gives it."""
        if isinstance(model, str):
            return model
        if not is_chat_model(model):
            raise InvalidAppError(
                f"model {model!r} must be a '<provider>/<model id>' string or a chat model object"
            )
        ref = chat_ref(model, self._chat_objects)
        self.models.register(ref, model)
        return ref

    def _embedding_ref(self, what: str, model: str | Embedder) -> str:
        """``model``'s ref; an object is registered under its own ``ref``."""
        if isinstance(model, str):
            return model
        ref = embedder_ref(model, self._embedder_objects, what)
        self.embedders.register(ref, model)
        return ref

    def _check_embedding_model(self, what: str, ref: str) -> None:
        try:
            self.embedders.resolve(ref)
        except Exception as error:
            raise InvalidAppError(f"{what}: {error}") from None

    def _check_collection(self, collection: KnowledgeCollection) -> None:
        if not isinstance(collection, KnowledgeCollection):
            raise InvalidAppError(
                f"{collection!r} is not a collection: build it with knowledge_collection(...)"
            )
        if collection.name in self.collections:
            raise InvalidAppError(f"collection {collection.name!r} is declared twice")
        what = f"collection {collection.name!r}"
        if collection.embedder is not None:
            self._embedding_ref(what, collection.embedder)
        self._check_embedding_model(what, collection.model)
        for source in collection.sources:
            try:
                source.check()
            except InvalidAgentDefinitionError as error:
                raise InvalidAgentDefinitionError(
                    f"collection {collection.name!r}: {error.message}"
                ) from None
            except Exception as error:
                raise InvalidAgentDefinitionError(
                    f"collection {collection.name!r}: source {source.kind!r} failed its check: {error}"
                ) from None

    def _add_agent_knowledge(self, agent: Agent) -> None:
        """Declares ``agent``'s own knowledge folder as its collection, embedded by ``embedding_model``.

        Raises:
            InvalidAppError: a declared collection has the folder's reserved name.
        """
        if agent.knowledge is None:
            return
        name = agent.knowledge.collection
        if name in self.collections:
            raise InvalidAppError(
                f"agent {agent.name!r}'s knowledge folder is the collection {name!r}, and a declared "
                f"collection knowledge_collection({name!r}, ...) has that name too: rename the declared one"
            )
        collection = knowledge_collection(
            name, model=self.embedding_model or DEFAULT_EMBEDDING_MODEL, sources=agent.knowledge.sources
        )
        self._check_collection(collection)
        self.collections[name] = collection
        self.collection_owners[name] = agent.name

    def _check_agent(self, agent: Agent) -> None:
        ref = self._chat_ref(agent.model) if agent.model is not None else self.model
        if ref is None:
            raise InvalidAgentDefinitionError(
                f"agent {agent.name!r} has no model: give it model= or give the App a default model="
            )
        try:
            model = self.models.resolve(ref)
        except Exception as error:
            raise InvalidAgentDefinitionError(f"agent {agent.name!r}: {error}") from None
        if agent.conversation.summarizer is not None:
            try:
                self.models.resolve(agent.conversation.summarizer)
            except Exception as error:
                raise InvalidAgentDefinitionError(f"agent {agent.name!r}: {error}") from None
        refused = refused_settings(model, agent.model_settings)
        if refused:
            raise InvalidAgentDefinitionError(
                f"agent {agent.name!r}: model {ref!r} does not support its model_settings: "
                + "; ".join(refused)
            )
        self._model_refs[agent.name] = ref
        self._tools[agent.name] = self._with_skill_tools(agent, agent.tools)
        for server in agent.mcp_servers:
            if server not in self.mcp_servers:
                known = ", ".join(repr(s) for s in self.mcp_servers) or "none"
                raise InvalidAgentDefinitionError(
                    f"agent {agent.name!r} uses the tools of MCP server {server!r}, which the App does not "
                    f"declare: declared MCP servers are {known} (App(mcp_servers=[mcp_server(...)]))"
                )
        for subscription in agent.channels:
            if subscription.channel not in self.channels:
                known = ", ".join(repr(c) for c in self.channels) or "none"
                raise InvalidAgentDefinitionError(
                    f"agent {agent.name!r} subscribes to unknown channel {subscription.channel!r}: "
                    f"registered channels are {known}"
                )

    def skill_sources(self, agent: Agent) -> tuple[SkillSource, ...]:
        """``agent``'s skill sources: the App's defaults, then its own."""
        return (*self.skills, *agent.skills)

    def _with_skill_tools(self, agent: Agent, tools: Mapping[str, Tool]) -> Mapping[str, Tool]:
        """``tools`` and, for an agent with skills, ``skill_load`` and ``skill_read``.

        Raises:
            InvalidAgentDefinitionError: one of ``tools`` has a skill tool's name.
        """
        if not self.skill_sources(agent):
            classified = sorted(set(agent.trust.tools) & set(SKILL_TOOL_NAMES))
            if classified:
                raise InvalidAgentDefinitionError(
                    f"agent {agent.name!r}: trust classifies {classified[0]!r}, a skill tool, but the agent "
                    "has no skills: give it skills=[...] or the App skills=[...]"
                )
            return tools
        taken = sorted(set(tools) & set(SKILL_TOOLS))
        if taken:
            raise InvalidAgentDefinitionError(
                f"agent {agent.name!r} has skills and a tool named {taken[0]!r}, the name of a skill tool: "
                "rename the tool"
            )
        return {**tools, **SKILL_TOOLS}

    def tools_of(self, agent: Agent, built: Mapping[str, Tool] | None = None) -> Mapping[str, Tool]:
        """What ``agent``'s runs offer: its own tools (or what its factory ``built``) and the skill tools.

        Raises:
            InvalidAgentDefinitionError: a factory built a tool under a skill tool's name.
        """
        if built is not None:
            what = f"agent {agent.name!r}: its tool factory"
            refuse_others(what, built, self.collection_owners, agent.name)
            return self._with_skill_tools(agent, built)
        known = self._tools.get(agent.name)
        return known if known is not None else self._with_skill_tools(agent, agent.tools)

    def agent(self, name: str) -> Agent:
        """The agent named ``name``.

        Raises:
            AgentNotFoundError: the app serves no such agent.
        """
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(repr(a) for a in sorted(self.agents)) or "none"
            raise AgentNotFoundError(f"unknown agent {name!r}: this app serves {known}")
        return agent

    def mcp_server(self, name: str) -> McpServer:
        """The declared MCP server named ``name``.

        Raises:
            InvalidAppError: the app declares no such server (a run started by another app version).
        """
        server = self.mcp_servers.get(name)
        if server is None:
            known = ", ".join(repr(s) for s in self.mcp_servers) or "none"
            raise InvalidAppError(f"unknown MCP server {name!r}: this app declares {known}")
        return server

    def model_for(self, agent: Agent) -> tuple[str, ChatModel]:
        """The agent's model ref (its own, else the app's default) and the chat model serving it."""
        if agent.revision is None:
            ref: str | None = self._model_refs[agent.name]  # every code agent's is set at construction
        else:  # a runtime agent's data names a ref, or takes the default (chamvi.dynamic_agents)
            ref = agent.model if isinstance(agent.model, str) else self.model
        if ref is None:
            raise ModelNotFoundError(
                f"runtime agent {agent.name!r} names no model and the App has no default model="
            )
        return ref, self.models.resolve(ref)

    def spec(self, name: str) -> AgentSpec:
        """The serialisable description of an agent with its own tools (a factory's build none here).

        A run's spec, with what its factory built, is its worker's (``AppRuntime.spec``).
        """
        agent = self.agent(name)
        return agent_spec(self, agent, self.tools_of(agent))


def _registry(models: ModelRegistry | Sequence[ModelRegistry | NamedProvider] | None) -> ModelRegistry:
    """``App(models=...)`` as one registry.

    Raises:
        InvalidAppError: an entry is neither a registry nor a named provider.
    """
    if models is None:
        return ModelRegistry()
    if isinstance(models, ModelRegistry):
        return models
    if isinstance(models, str) or not isinstance(models, Sequence):
        raise InvalidAppError(f"models={models!r} must be a list of providers or a ModelRegistry")
    for item in models:
        if not isinstance(item, ModelRegistry | NamedProvider):
            raise InvalidAppError(
                f"models: {item!r} is not a provider: give openai_compatible(name, base_url=...), "
                "AnthropicProvider(...), an object with a name and a model(model_id), or a ModelRegistry"
            )
    return ModelRegistry.of(models)


def agent_spec(app: App, agent: Agent, tools: Mapping[str, Tool]) -> AgentSpec:
    """The serialisable description the workflow runs on, with ``tools``; it never imports the app."""
    ref, _ = app.model_for(agent)
    return AgentSpec(
        name=agent.name,
        model=ref,
        budget=agent.budget.spec(),
        tools=[
            ToolSpec(
                name=t.name,
                effect=t.effect is not None,
                taint=bool(agent.trust.of(t).taint),
                guard_when_tainted=bool(agent.trust.of(t).guard_when_tainted),
                retry=retry_spec(t.retry) if t.retry is not None else None,
            )
            for t in tools.values()
        ],
        structured_output=agent.output is not None,
        channels=[s.channel for s in agent.channels],
        untrusted_channels=[c.name for c in app.channels.values() if getattr(c, "untrusted", False)],
        model_timeout_seconds=app.timeouts.model.total_seconds(),
        tool_timeout_seconds=app.timeouts.tool.total_seconds(),
        tool_heartbeat_seconds=app.timeouts.tool_heartbeat.total_seconds(),
        model_retry=retry_spec(app.retry.model),
        tool_retry=retry_spec(app.retry.tool),
        mcp_servers=list(agent.mcp_servers),
        classified_tools=sorted(agent.trust.tools),
        revision=agent.revision,
    )
