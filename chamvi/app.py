"""``App``: the agents, models and channels a worker serves, checked once at construction."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar, Unpack

from chamvi.agents import Agent
from chamvi.channels import Channel, validate_channel_name
from chamvi.context import ContextKey, Provided
from chamvi.errors import (
    AgentNotFoundError,
    InvalidAgentDefinitionError,
    InvalidAppError,
    InvalidScheduleError,
)
from chamvi.knowledge.collections import KnowledgeCollection
from chamvi.knowledge.embedders import EmbeddingRegistry, default_embedding_registry
from chamvi.mcp import McpServer
from chamvi.models import AgentSpec, ToolSpec
from chamvi.permissions import PolicyRun
from chamvi.providers import ChatModel, ModelRegistry, default_registry
from chamvi.retry import RetryPolicies, retry_spec
from chamvi.run_events import EventHub, Listener
from chamvi.schedules import AgentSchedule, ScheduleOptions, define_schedule
from chamvi.tools import Tool

T = TypeVar("T")

TOOL_SETS_KEPT = 256
"""Runs whose factory-built tool sets a worker keeps (the least recently used go first)."""


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
        model: the model of agents that name none.
        models: extra providers or exact model refs (scripted models in tests), on top of
            ``openai/...`` and ``local/...``.
        channels: channels by unique name; agents subscribe to them and tools send through them.
        timeouts: activity timeouts.
        collections: knowledge collections, declared with ``knowledge_collection(...)``.
        embedders: extra embedding providers or exact refs (test embedders), on top of
            ``openai/...``, ``fastembed/...`` and ``local/...``.
        embedding_model: the managed collections' model (``CHAMVI_KNOWLEDGE_MODEL`` wins over it).
        retry: how model, tool and embedding calls are retried (Temporal retry policies); the
            defaults retry a model call 10 times and a tool call 10 times, and leave a failed
            embedding call to the collection's backoff.
        mcp_servers: MCP servers, declared with ``mcp_server(...)``, unique by name; agents use
            their tools through ``mcp_tools(name)``.
        start_channels: whether workers start the receiving channels (those with ``start(ctx)``);
            off, runs come only from dispatches and schedules, and still send through every
            channel's ``out`` (the seed's ``start({ channels: false })``). A worker's
            ``ChamviPlugin(start_channels=...)`` or ``CHAMVI_NO_CHANNELS=true`` overrides it.

    Raises:
        InvalidAppError, InvalidAgentDefinitionError: the boot fails, naming the problem.
    """

    def __init__(
        self,
        *,
        agents: Sequence[Agent],
        model: str | None = None,
        models: ModelRegistry | None = None,
        channels: Sequence[Channel] = (),
        timeouts: ActivityTimeouts | None = None,
        collections: Sequence[KnowledgeCollection] = (),
        embedders: EmbeddingRegistry | None = None,
        embedding_model: str | None = None,
        retry: RetryPolicies | None = None,
        mcp_servers: Sequence[McpServer] = (),
        start_channels: bool = True,
    ) -> None:
        self.start_channels = start_channels
        self.model = model
        self.models = default_registry().merged(models) if models is not None else default_registry()
        self.timeouts = timeouts or ActivityTimeouts()
        self.retry = retry or RetryPolicies()
        self.provided = Provided()
        self.events = EventHub()
        """This process's run event listeners (``on``) and the streams that follow runs here."""
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
        self.embedding_model = embedding_model
        if embedding_model is not None:
            self._check_embedding_model("embedding_model", embedding_model)
        self.collections: dict[str, KnowledgeCollection] = {}
        for collection in collections:
            self._check_collection(collection)
            self.collections[collection.name] = collection
        self._tool_sets: OrderedDict[str, dict[str, Tool]] = OrderedDict()
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
        self.schedules: dict[str, AgentSchedule] = {}

    def schedule(self, agent: str, **options: Unpack[ScheduleOptions]) -> AgentSchedule:
        """Declares a Temporal Schedule that runs ``agent``; every worker's start creates or updates it.

        ``app.schedule("digest", cron="0 8 * * *", payload={...}, overlap="skip", id="daily-digest")``:
        exactly one of ``cron`` and ``every`` (the options are :class:`chamvi.schedules.ScheduleOptions`).
        Each fire dispatches an ordinary run whose idempotency key is the schedule id and the fire
        time. A schedule the code stops declaring is deleted by the next worker that starts.

        Returns:
            The validated schedule.

        Raises:
            AgentNotFoundError: the app serves no such agent.
            InvalidScheduleError: both or neither of cron and every, a bad cron, interval, overlap,
                zone or id, or an id declared twice.
        """
        declared = define_schedule(agent, **options)
        self.agent(agent)
        if declared.id in self.schedules:
            raise InvalidScheduleError(f"two schedules have the id {declared.id!r}: give one another id=")
        self.schedules[declared.id] = declared
        return declared

    def on(self, event_type: str, listener: Listener) -> Callable[[], None]:
        """Calls ``listener(event)`` for each run event of ``event_type`` this process sees.

        ``run.delta`` (the model's text and reasoning while it writes, never stored) reaches the
        listeners of the worker process that makes the model call. The other types reach the
        listeners of the worker process that started the run, each once, read from the run's
        history as it grows; a run that process no longer serves (it stopped) is heard no more
        there. From any process, ``ChamviClient.events(run_id)`` reads every event of a run.

        Args:
            event_type: one of ``chamvi.run_events.EVENT_TYPES``, or ``"*"`` for all.
            listener: a function or coroutine function; its errors are logged, never raised.

        Returns:
            A function that removes the listener.

        Raises:
            InvalidInputError: ``event_type`` is no event type.
        """
        return self.events.on(event_type, listener)

    def provide(self, key: ContextKey[T], value: T) -> None:
        """Gives tools a shared instance under ``key`` (read with ``inject(ctx, key)``); once per key."""
        self.provided.provide(key, value)

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
        self._check_embedding_model(f"collection {collection.name!r}", collection.model)
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

    def _check_agent(self, agent: Agent) -> None:
        ref = agent.model or self.model
        if ref is None:
            raise InvalidAgentDefinitionError(
                f"agent {agent.name!r} has no model: give it model= or give the App a default model="
            )
        for model in (ref, agent.conversation.summarizer):
            try:
                if model is not None:
                    self.models.resolve(model)
            except Exception as error:
                raise InvalidAgentDefinitionError(f"agent {agent.name!r}: {error}") from None
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
        ref = agent.model or self.model
        assert ref is not None  # checked at construction
        return ref, self.models.resolve(ref)

    def tools_for(self, agent: Agent, run: PolicyRun) -> Mapping[str, Tool]:
        """The run's tool set, built once per run and worker when the agent has a tool factory.

        Every activity of the run (describe, model, tool calls) asks here, so a factory runs once per
        run on each worker that serves it rather than at every step.
        """
        if agent.tool_factory is None:
            return agent.tools
        key = f"{agent.name}\0{run.run_id}"
        tools = self._tool_sets.get(key)
        if tools is None:
            tools = agent.build_tools(run)
            self._tool_sets[key] = tools
            while len(self._tool_sets) > TOOL_SETS_KEPT:
                self._tool_sets.popitem(last=False)
        self._tool_sets.move_to_end(key)
        return tools

    def spec(self, name: str, run: PolicyRun | None = None) -> AgentSpec:
        """The serialisable description the workflow runs on; it never imports the app.

        Args:
            name: the agent.
            run: the run it is for; an agent with a tool factory lists its tools only for a run.
        """
        agent = self.agent(name)
        ref, _ = self.model_for(agent)
        tools = self.tools_for(agent, run) if run is not None else agent.tools
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
            untrusted_channels=[c.name for c in self.channels.values() if getattr(c, "untrusted", False)],
            model_timeout_seconds=self.timeouts.model.total_seconds(),
            tool_timeout_seconds=self.timeouts.tool.total_seconds(),
            tool_heartbeat_seconds=self.timeouts.tool_heartbeat.total_seconds(),
            model_retry=retry_spec(self.retry.model),
            tool_retry=retry_spec(self.retry.tool),
            mcp_servers=list(agent.mcp_servers),
            classified_tools=sorted(agent.trust.tools),
        )
