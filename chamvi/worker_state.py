"""``AppRuntime``: what one worker holds while it serves an App, so that the App stays a definition.

``ChamviPlugin`` builds one per plugin and hands it to the activities, the tool runner, the state
views and (in ``chamvi dev``) the HTTP API: the worker's state store and knowledge searcher (as
provided values over the App's own), its event hub (the App's declared listeners and error hook, and
the streams that follow runs in this process), its run slots (``chamvi._run_slots``), its artifact
store, its long-lived sessions of the App's MCP servers (``chamvi.mcp._sessions``), and the tool
sets its agents' factories built for the runs it serves. Two workers built from one App hold two of
these and share nothing but the App's declarations.

Outside a worker, ``AppRuntime(app)`` runs tools over an in-memory artifact store and no state store
(``ctx.state`` refuses), which is what unit tests and ``wrap_tools_for_run`` need.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from weakref import WeakKeyDictionary

from chamvi._run_context import Approvals, EffectLedger, RunContext
from chamvi._run_slots import DEFAULT_MAX_RUNS, RunSlots
from chamvi.agent_revisions import AgentRevisionStore, ObjectRevisionStore
from chamvi.agents import Agent, RunTools
from chamvi.app import App, agent_spec
from chamvi.approval_tokens import ApprovalTokens
from chamvi.artifacts import ArtifactStore
from chamvi.channels import ChannelAccess
from chamvi.context import DATA_FOLDER, Provided
from chamvi.dynamic_agents import RuntimeAgents
from chamvi.knowledge.search import KNOWLEDGE_SEARCH, KnowledgeSearch
from chamvi.mcp._sessions import McpSessions
from chamvi.models import AgentSpec, Message
from chamvi.permissions import PolicyRun
from chamvi.run_events import EventHub
from chamvi.run_history import history_events
from chamvi.skills.library import SkillLibrary
from chamvi.skills.tools import SKILLS
from chamvi.state import STATE_STORE, AgentStateAccess, StateStore
from chamvi.tool_factory import FactoryArtifacts, ToolFactoryContext
from chamvi.tools import Tool

TOOL_SETS_KEPT = 256
"""Runs whose factory-built tool sets a worker keeps (the least recently used go first)."""

_SERVING: ContextVar[AppRuntime | None] = ContextVar("chamvi.serving", default=None)
_LATEST: WeakKeyDictionary[App, AppRuntime] = WeakKeyDictionary()
"""The runtime that opened its stores last, per App: kept beside the App, never in it."""


def _revisions_in(artifacts: ArtifactStore) -> ObjectRevisionStore:
    return ObjectRevisionStore(artifacts.store, artifacts.location)


def serving(app: App) -> AppRuntime | None:
    """The runtime serving ``app`` in this process, if any.

    The one running the current tool call, else the one of this process that opened its stores
    last; None in a process that serves no worker of it. For code written beside the App that
    needs a worker's own instances (:func:`searcher_of`); with two workers of
    one App in a process, a tool call gets its own worker's.
    """
    runtime = _SERVING.get()
    if runtime is not None and runtime.app is app:
        return runtime
    return _LATEST.get(app)


def searcher_of(app: App) -> KnowledgeSearch | None:
    """The searcher a worker built for ``app`` (None until one is built, e.g. in the CLI).

    In a tool call, the searcher of the worker running it (:func:`serving`). The ``search=`` of a
    ``chamvi.knowledge_store.VectorKnowledgeStore``: ``search=lambda: searcher_of(app)``.
    """
    runtime = serving(app)
    return runtime.search if runtime is not None else None


async def _nothing_recorded(key: str) -> tuple[bool, None]:
    return False, None


class AppRuntime:
    """One worker's holdings for ``app`` (see the module).

    Args:
        app: the definition served.
        artifacts: where ``ctx.artifacts`` keeps files; by default this process's memory.
        max_runs: the most runs executing at once in this worker (``chamvi._run_slots``).
        skills_cache: where skill sources keep what they fetch (git clones); the temp folder by
            default, ``<data>/skills`` in a worker with settings.
        data: the data folder of a worker with settings, which tools read as ``DATA_FOLDER``.
        approval_tokens: signs the approval tokens channel requests carry; None: they carry none.
        revisions: where runtime agents' revisions live; by default the artifact store's object store
            (``chamvi.agent_revisions``), the one every process of the deployment shares.

    Raises:
        InvalidAppError: ``max_runs`` is not a positive whole number.
    """

    def __init__(
        self,
        app: App,
        *,
        artifacts: ArtifactStore | None = None,
        max_runs: int = DEFAULT_MAX_RUNS,
        skills_cache: Path | None = None,
        data: Path | None = None,
        approval_tokens: ApprovalTokens | None = None,
        revisions: AgentRevisionStore | None = None,
    ) -> None:
        self.app = app
        self.artifacts = artifacts or ArtifactStore.memory()
        self._own_revisions = revisions is None
        self.agents = RuntimeAgents(app, revisions or _revisions_in(self.artifacts))
        """The agents this worker serves: the App's, and those defined at runtime (their revisions)."""
        self.provided = Provided(parent=app.provided)
        """What tools inject: chamvi's own keys for this worker, over the App's values."""
        self.events = EventHub(app.listeners, app.errors, history=history_events)
        """This worker's run events: the App's listeners (their failures to the App's ``on_error``),
        and the streams that follow runs here."""
        self.slots = RunSlots(max_runs)
        """The run slots this worker's model, extract and tool calls take."""
        self.mcp_sessions = McpSessions()
        """This worker's sessions of the App's MCP servers: one per server, reused by every run's
        listings and calls, closed by the plugin when the worker stops."""
        self.state: StateStore | None = None
        """The agents' state store, once the worker opened it (none outside a worker)."""
        self.approval_tokens: ApprovalTokens | None = approval_tokens
        """Signs the tokens (and links) the approval requests sent through channels carry."""
        self._tool_sets: OrderedDict[str, RunTools] = OrderedDict()
        self.skills = SkillLibrary(app, lambda: self.artifacts, skills_cache)
        """The agents' skills: loaded at the worker's boot, read back at each run's pinned version."""
        self.provided.set(SKILLS, self.skills)
        if data is not None:
            self.provided.set(DATA_FOLDER, data)

    def open(self, *, state: StateStore, search: KnowledgeSearch, artifacts: ArtifactStore) -> None:
        """Takes the stores a worker opened (again for each worker the plugin configures)."""
        self.state = state
        self.artifacts = artifacts
        if self._own_revisions:
            self.agents.use(_revisions_in(artifacts))
        self.provided.set(STATE_STORE, state)
        self.provided.set(KNOWLEDGE_SEARCH, search)
        _LATEST[self.app] = self

    @property
    def search(self) -> KnowledgeSearch | None:
        """The knowledge searcher of this worker, once opened."""
        return self.provided.get(KNOWLEDGE_SEARCH)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Marks the block (a tool call) as served by this runtime, for :func:`serving`."""
        token = _SERVING.set(self)
        try:
            yield
        finally:
            _SERVING.reset(token)

    def state_of(self, agent: Agent) -> AgentStateAccess | None:
        """``ctx.state`` of ``agent`` over this worker's store (none before it opened one)."""
        if self.state is None:
            return None
        return AgentStateAccess(self.state, agent.name, agent.state.collections)

    def run_tools(self, agent: Agent, run: PolicyRun) -> RunTools:
        """The run's tools and their configuration, built once per run and worker by a tool factory.

        Every activity of the run (describe, model, tool calls) asks here, so a factory runs once per
        run on each worker that serves it rather than at every step.

        Raises:
            ChamviError: the factory failed (see ``Agent.build_tools``).
        """
        if agent.tool_factory is None:
            return RunTools(self.app.tools_of(agent), agent.tools_context)
        key = f"{agent.name}\0{run.run_id}"
        built = self._tool_sets.get(key)
        if built is None:
            built = agent.build_tools(self._factory_context(agent, run))
            built = RunTools(self.app.tools_of(agent, built.tools), built.context)
            self._tool_sets[key] = built
            while len(self._tool_sets) > TOOL_SETS_KEPT:
                self._tool_sets.popitem(last=False)
        self._tool_sets.move_to_end(key)
        return built

    def tools_for(self, agent: Agent, run: PolicyRun) -> Mapping[str, Tool]:
        """The run's tools by name (see :meth:`run_tools`)."""
        return self.run_tools(agent, run).tools

    def spec(self, name: str, run: PolicyRun) -> AgentSpec:
        """The serialisable description of ``name`` (in code) for ``run``, with what its factory built.

        Raises:
            AgentNotFoundError: the app serves no such agent.
            ChamviError: the factory failed, before any model call of the run.
        """
        agent = self.app.agent(name)
        return agent_spec(self.app, agent, self.tools_for(agent, run))

    async def instructions_for(self, agent: Agent, skills_version: str | None) -> tuple[Message, ...]:
        """A model call's configured messages: the agent's instructions, then its run's skill catalog.

        The catalog block is the version the run recorded at its start, rebuilt for each call and
        never part of the transcript.

        Raises:
            ArtifactNotFoundError: the artifact store does not hold that version.
        """
        catalog = await self.skills.pinned(skills_version)
        return agent.instructions if catalog is None else (*agent.instructions, catalog.message())

    async def describe(self, name: str, run: PolicyRun | None) -> AgentSpec:
        """The spec a new run of ``name`` starts on: the App's agent, else its latest runtime revision.

        The spec carries a runtime agent's revision, which the run then passes to each of its calls,
        and, for a run, the version of the agent's skills (its own, or the App's defaults for a
        runtime agent), which every model and tool call of the run then reads. Without ``run`` (a
        check before a dispatch), a factory builds nothing and no version is recorded.

        Raises:
            AgentNotFoundError: neither the App nor a live runtime revision has the name.
            ChamviValidationError: the latest revision names what the App no longer serves.
            ChamviError: the factory failed, before any model call of the run.
        """
        agent = await self.agents.current(name)
        if run is None:
            return agent_spec(self.app, agent, self.app.tools_of(agent))
        spec = agent_spec(self.app, agent, self.tools_for(agent, run))
        # the run's skills from now to its end: this version, whatever a later deploy changes
        catalog = await self.skills.current(agent)
        spec.skills_version = catalog.version if catalog is not None else None
        return spec

    async def agent(self, name: str, revision: int | None) -> Agent:
        """The agent a call of a run asks for: in code (``revision`` None), else that revision.

        Raises:
            AgentNotFoundError: the App has no such agent, or the store no such revision.
        """
        return await self.agents.agent(name, revision)

    def _factory_context(self, agent: Agent, run: PolicyRun) -> ToolFactoryContext:
        """The factory's tool context: the run, its state, files and channels; no send from it."""
        # a factory runs outside any tool call: no step, no call id, nothing recorded or approved
        outside = RunContext(
            run_id=run.run_id,
            agent=run.agent,
            trigger=run.trigger,
            cancellation=asyncio.Event(),
            step=-1,
            tool_call_id="",
        )
        channels = ChannelAccess(
            self.app.channels,
            outside,
            EffectLedger(_nothing_recorded),
            Approvals(),
            on_tainted=agent.trust.on_tainted,
            in_tool_call=False,
        )
        return ToolFactoryContext(
            run=run,
            channels=channels,
            artifacts=FactoryArtifacts(self.artifacts, run.run_id),
            provided=self.provided,
            state_access=self.state_of(agent),
        )
