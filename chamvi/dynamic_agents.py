"""Agents defined at runtime: put and removed as data, stored with revisions, pinned per run.

The seed's ``putAgent`` / ``removeAgent``. What a runtime agent may be made of is data only
(:class:`~chamvi.models.agents.AgentDefinition`):

* ``model``: a ref the App's registry resolves (``openai/gpt-4o-mini``); none: the App's default;
* ``instructions``: text, or system/user/assistant text messages;
* ``tools`` and ``mcp_servers``: names from the App's ``runtime_tools`` catalog (code stays in the
  App; data picks from it);
* ``budget``: steps (at most 1000), tokens, the timeout (at most about 24.8 days);
* ``tool_policy``: ``require_tool_permission()`` as data;
* ``trust``: ``on_tainted``, and taint or guards *added* to its tools (never removed: what the code
  marked stays marked);
* ``model_settings``: ``ModelSettings`` as data, checked as ``define_agent`` checks them (ranges, a
  named tool among the agent's tools) and against what the model's provider supports, each problem
  at its field (``model_settings.temperature``);
* ``dispatch_settings``: ``DispatchSettings`` as data, which model settings a dispatch may set (by
  default temperature, top_p, stop and seed).

Not allowed, because each is code or configuration the App owns: tool factories, hooks, structured
output types, state collections (their types), ``tools_context`` (where secrets go: configure those
tools in code and ``App.provide`` what they need), channel subscriptions (inbound channels route to
the agents in code; a runtime agent's run still has a source channel and sends through the App's
channels), and a name a code agent holds.

Each put writes a new immutable revision (1, 2, 3 ...) to an :class:`~chamvi.agent_revisions.
AgentRevisionStore` (the artifact store's, shared by every process); a put equal to the latest
revision writes nothing (PUT is idempotent). A remove writes a revision without a definition: new
runs are refused (``agent_not_found``) while runs already going finish on their revision. A run
reads the latest revision once, when it starts (``describe_agent``), records it in its spec, and
every model, extraction and tool call of the run asks for that revision by number, so a run keeps
the revision it started with across later puts, worker restarts, retries and approvals.

Caching: a revision is immutable, so each worker keeps the agents it built (the least recently
used go first). Which revision is latest is read from the store again once it is
:data:`LATEST_FRESH` old; a put or remove in this process is seen at once, one in another process
within that time.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_json

from chamvi._constants import AGENT_DEFINITION_MAX_BYTES, SKILL_TOOL_NAMES
from chamvi._names import checked_agent_name, is_valid_name
from chamvi.agent_revisions import AgentRevisionStore
from chamvi.agents import Agent, AgentTrust, Budget, define_agent
from chamvi.app import App
from chamvi.errors import (
    AgentNotFoundError,
    ChamviValidationError,
    ConflictError,
    InvalidAgentDefinitionError,
    ValidationIssue,
    describe_issues,
    validation_issues,
)
from chamvi.mcp import McpTools, mcp_tools
from chamvi.models import Invoker, ModelSettings
from chamvi.models.agents import (
    INSTRUCTION_KINDS,
    AgentDefinition,
    AgentInfo,
    AgentPutResult,
    AgentRevision,
)
from chamvi.permissions import require_tool_permission
from chamvi.providers import ChatModel
from chamvi.providers._base import refused_settings
from chamvi.skills.tools import SKILL_TOOLS
from chamvi.tools import Tool, Trust

LATEST_FRESH = timedelta(seconds=2)
"""How long a worker trusts what it read as an agent's latest revision before reading it again."""
AGENTS_KEPT = 256
"""Built revisions a process keeps (immutable: only memory is at stake), and names whose latest
revision it remembers (unknown names a dispatch asked for included)."""
WRITE_ATTEMPTS = 20
"""How often a put takes the next number when other writers keep taking it first."""


def _issue(path: tuple[str | int, ...], message: str, code: str) -> ValidationIssue:
    return ValidationIssue(path, message, code)


def _refuse(name: str, issues: Sequence[ValidationIssue]) -> ChamviValidationError:
    return ChamviValidationError(
        f"agent {name!r} is not a valid runtime agent: {describe_issues(issues)}", issues=issues
    )


def parse_definition(name: str, data: Mapping[str, Any] | AgentDefinition) -> AgentDefinition:
    """``data`` as a definition of agent ``name``, its ``name`` set; the fields checked, not the App.

    Raises:
        ChamviValidationError: a field is missing, of the wrong type, unknown or out of bounds, or
            ``name`` differs; each problem is an issue with its field's path.
    """
    if isinstance(data, AgentDefinition):
        data = data.model_dump(exclude_none=True)
    if not isinstance(data, Mapping):
        message = "a runtime agent's definition is an object (instructions, model, tools, budget, ...)"
        raise _refuse(name, [_issue((), message, "model_type")])
    if "skills" in data:
        # skills are code (reviewed folders, pinned git commits), like tools; a runtime agent's data
        # cannot bring its own, and there is no App catalog of optional skills to pick them from
        message = (
            "a runtime agent cannot name skills: it has the App's default skills (App(skills=[...])); "
            "an agent that needs skills of its own is defined in code (define_agent(skills=[...]))"
        )
        raise _refuse(name, [_issue(("skills",), message, "skills_not_supported")])
    if "knowledge" in data:
        # an agent's knowledge folder is a collection the App declares at boot, read from the
        # worker's disk: data put at runtime can neither add a collection nor point at a folder
        message = (
            "a runtime agent cannot have a knowledge folder: its collection is declared when the App "
            "boots; define the agent in code (define_agent(knowledge=...)), or give this one a "
            "knowledge_search tool from App(runtime_tools=[...])"
        )
        raise _refuse(name, [_issue(("knowledge",), message, "knowledge_not_supported")])
    size = len(to_json(data))
    if size > AGENT_DEFINITION_MAX_BYTES:
        limit = AGENT_DEFINITION_MAX_BYTES
        message = f"the definition is {size:,} bytes as JSON, over the limit of {limit:,}"
        raise _refuse(name, [_issue((), message, "too_large")])
    try:
        definition = AgentDefinition.model_validate(data)
    except PydanticValidationError as error:
        raise _refuse(
            name, [_untagged(i) for i in validation_issues(error.errors(include_input=False))]
        ) from None
    if definition.name is not None and definition.name != name:
        message = f"the definition names agent {definition.name!r}, but it is put as {name!r}"
        raise _refuse(name, [_issue(("name",), message, "name_mismatch")])
    return definition.model_copy(update={"name": name})


def _untagged(issue: ValidationIssue) -> ValidationIssue:
    """The issue at its place in the data: ``instructions.0.role``, not ``instructions.messages.0.role``."""
    path = issue.path
    if len(path) > 1 and path[0] == "instructions" and path[1] in INSTRUCTION_KINDS:
        return ValidationIssue(("instructions", *path[2:]), issue.message, issue.code)
    return issue


def _problems(app: App, name: str, definition: AgentDefinition) -> list[ValidationIssue]:
    """What in ``definition`` the App cannot serve, each at its field's path."""
    issues: list[ValidationIssue] = []
    ref = definition.model or app.model
    if ref is None:
        issues.append(
            _issue(("model",), "no model: give the agent a model, or the App a default model=", "missing")
        )
    else:
        try:
            model = app.models.resolve(ref)
        except Exception as error:
            issues.append(_issue(("model",), str(error), "model_not_found"))
        else:
            issues += _settings_problems(definition, model, ref)
    issues += _unknown_names(
        "tools", definition.tools, app.runtime_tools, "tool", "none (App(runtime_tools=[...]))"
    )
    issues += _unknown_names(
        "mcp_servers", definition.mcp_servers, app.runtime_mcp_servers, "MCP server", "none"
    )
    skill_tools = SKILL_TOOL_NAMES if app.skills else ()
    for tool_name in definition.trust.tools:
        if tool_name not in definition.tools and tool_name not in skill_tools:
            message = f"trust names {tool_name!r}, which is none of the agent's tools"
            issues.append(_issue(("trust", "tools", tool_name), message, "unknown_tool"))
    return issues


def _settings_problems(definition: AgentDefinition, model: ChatModel, ref: str) -> list[ValidationIssue]:
    """The model settings' problems at ``model_settings.<field>``, and what ``ref`` does not support.

    A named tool is checked against the agent's own tools; with MCP servers, when a run lists them.
    """
    settings = definition.model_settings
    if settings is None:
        return []
    tools = None if definition.mcp_servers else set(definition.tools)
    issues = [
        _issue(("model_settings", field), message, "invalid_setting")
        for field, message in settings.field_problems(tools)
    ]
    issues += [
        _issue(("model_settings",), f"model {ref!r} does not support it: {message}", "unsupported_setting")
        for message in refused_settings(model, settings)
    ]
    return issues


def _servable_settings(
    definition: AgentDefinition, issues: Sequence[ValidationIssue], tools: set[str], mcp: bool
) -> ModelSettings | None:
    """The definition's settings, or None when they have a problem.

    Only a lenient build gets that far: a run going on after a deploy took its named tool out of
    the catalog goes on without them.
    """
    settings = definition.model_settings
    if settings is None or any(i.path[:1] == ("model_settings",) for i in issues):
        return None
    return None if settings.field_problems(None if mcp else tools) else settings


def _unknown_names(
    field: str, names: Sequence[str], catalog: Collection[str], what: str, none: str
) -> list[ValidationIssue]:
    """An issue at ``field[i]`` for each name outside the App's catalog, or named twice."""
    offered = ", ".join(repr(n) for n in catalog) or none
    issues: list[ValidationIssue] = []
    for index, name in enumerate(names):
        if name not in catalog:
            message = f"{what} {name!r} is not among the App's runtime tools: they hold {offered}"
            issues.append(_issue((field, index), message, f"unknown_{what.lower().replace(' ', '_')}"))
        elif names.index(name) != index:
            issues.append(_issue((field, index), f"{what} {name!r} is named twice", "duplicate"))
    return issues


def _trust(definition: AgentDefinition, tools: Mapping[str, Tool]) -> AgentTrust:
    """The agent's trust: each override adds taint or a guard to the tool's own, never removes one."""
    classified: dict[str, Trust] = {}
    for tool_name, override in definition.trust.tools.items():
        tool = tools.get(tool_name)
        if tool is None or not (override.taint or override.guard_when_tainted):
            continue
        own = tool.trust
        classified[tool_name] = Trust(
            taint=True if override.taint else own.taint,
            guard_when_tainted=True if override.guard_when_tainted else own.guard_when_tainted,
        )
    return AgentTrust(on_tainted=definition.trust.on_tainted, tools=classified)


def build_agent(app: App, definition: AgentDefinition, revision: int, *, strict: bool = True) -> Agent:
    """The agent a revision describes, over the App's catalog and models.

    Args:
        app: the App whose runtime tools and models the agent uses.
        definition: the revision's data (its ``name`` set).
        revision: its number.
        strict: refuse what the App cannot serve (a put, a new run); off, a tool the catalog lost
            since the revision was written is left out (a run that goes on after a deploy: a call to
            it is a tool error, as for an agent in code).

    Raises:
        ChamviValidationError: strict, and the App cannot serve the definition (issues by field).
    """
    agent, issues = _built(app, definition, revision)
    if strict and issues:
        raise _refuse(definition.name or "", issues)
    return agent


def _built(app: App, definition: AgentDefinition, revision: int) -> tuple[Agent, list[ValidationIssue]]:
    """The agent, leaving out what the App cannot serve, and the issues that names."""
    name = definition.name or ""
    issues = _problems(app, name, definition)
    tools = {t: app.runtime_tools[t] for t in dict.fromkeys(definition.tools) if t in app.runtime_tools}
    servers = [s for s in dict.fromkeys(definition.mcp_servers) if s in app.runtime_mcp_servers]
    listed: list[Tool | McpTools] = [*tools.values(), *(m for s in servers for m in mcp_tools(s))]
    instructions: str | list[dict[str, Any]] = (
        definition.instructions
        if isinstance(definition.instructions, str)
        else [m.model_dump() for m in definition.instructions]
    )
    policy = definition.tool_policy
    budget = definition.budget
    try:
        agent = define_agent(
            name=name,
            model=definition.model or app.model,
            instructions=instructions,
            tools=listed,
            budget=Budget(
                max_steps=budget.max_steps,
                max_tokens=budget.max_tokens,
                timeout=timedelta(seconds=budget.timeout_seconds),
            ),
            tool_policy=(
                require_tool_permission(without_invoker=policy.without_invoker)
                if policy is not None and policy.require_permission
                else None
            ),
            trust=_trust(definition, {**tools, **(SKILL_TOOLS if app.skills else {})}),
            model_settings=_servable_settings(definition, issues, set(tools), bool(servers)),
            dispatch_settings=definition.dispatch_settings,
        )
    except InvalidAgentDefinitionError as error:  # what the checks above let through: a bug of theirs
        raise _refuse(name, [*issues, _issue((), error.message, "invalid_agent_definition")]) from None
    return replace(agent, revision=revision), issues


def _code_info(app: App, agent: Agent) -> AgentInfo:
    return AgentInfo(
        name=agent.name,
        kind="code",
        model=app.model_for(agent)[0],
        tools=list(agent.tools),
        mcp_servers=list(agent.mcp_servers),
    )


def _runtime_info(stored: AgentRevision, *, with_definition: bool = False) -> AgentInfo:
    definition = stored.definition
    assert definition is not None
    return AgentInfo(
        name=stored.name,
        kind="runtime",
        revision=stored.revision,
        model=definition.model,
        tools=list(definition.tools),
        mcp_servers=list(definition.mcp_servers),
        description=definition.description,
        created_at=stored.created_at,
        by=stored.by,
        definition=definition if with_definition else None,
    )


def _author(by: Invoker | None) -> Invoker | None:
    """Who wrote a revision, without the permissions their token held then."""
    return by.model_copy(update={"permissions": []}) if by is not None else None


class RuntimeAgents:
    """The agents an App serves, in code and defined at runtime, over one revision store.

    A worker's :class:`~chamvi.worker_state.AppRuntime` holds one (its activities resolve agents
    here); the HTTP API holds one over the same store. ``ChamviClient`` reaches a worker's through
    the ``AgentRegistry`` workflow. Its ``put_agent``, ``remove_agent``, ``get_agent`` and
    ``list_agents`` are the client's, with the same arguments.

    Args:
        app: the App: its code agents, runtime tool catalog and models.
        store: where revisions live (``ObjectRevisionStore(artifacts.store, ...)``).
        fresh: how long a read of the latest revision is trusted (see the module).
        kept: how many built revisions, and how many names' latest reads, are kept.
    """

    def __init__(
        self,
        app: App,
        store: AgentRevisionStore,
        *,
        fresh: timedelta = LATEST_FRESH,
        kept: int = AGENTS_KEPT,
    ) -> None:
        self.app = app
        self.store = store
        self._fresh = fresh.total_seconds()
        self._kept = kept
        self._latest: OrderedDict[str, tuple[float, AgentRevision | None]] = OrderedDict()
        self._built: OrderedDict[tuple[str, int], tuple[Agent, list[ValidationIssue]]] = OrderedDict()
        self._writing = asyncio.Lock()

    def use(self, store: AgentRevisionStore) -> None:
        """Reads and writes ``store`` from now on (a worker's, once it opened it), forgetting the old."""
        self.store = store
        self._latest.clear()
        self._built.clear()

    # ---- reads for runs ----------------------------------------------------------------------------

    async def latest(self, name: str) -> AgentRevision | None:
        """The latest revision of ``name`` (a remove's included), as read at most ``fresh`` ago."""
        now = time.monotonic()
        cached = self._latest.get(name)
        if cached is not None and cached[0] > now:
            return cached[1]
        stored = await self.store.latest(name)
        self._remember(name, stored)
        return stored

    def _remember(self, name: str, stored: AgentRevision | None) -> None:
        """Keeps what was read (or written) as ``name``'s latest, for ``fresh``; the oldest go first."""
        self._latest[name] = (time.monotonic() + self._fresh, stored)
        self._latest.move_to_end(name)
        while len(self._latest) > self._kept:  # names asked for and not put are remembered too
            self._latest.popitem(last=False)

    async def current(self, name: str) -> Agent:
        """The agent a new run of ``name`` runs: the App's, else the latest runtime revision.

        Raises:
            AgentNotFoundError: neither the App nor a live runtime revision has the name.
            ChamviValidationError: the latest revision names what the App no longer serves.
        """
        code = self.app.agents.get(name)
        if code is not None:
            return code
        stored = await self.latest(name) if is_valid_name(name) else None
        if stored is None or stored.definition is None:
            raise self._not_found(name, stored)
        return self._build(stored, strict=True)

    async def agent(self, name: str, revision: int | None) -> Agent:
        """The agent a run's call asks for: the App's (``revision`` None), else that revision.

        Raises:
            AgentNotFoundError: the App has no such agent, or the store no such revision (retried
                by the call: another worker, or the store once it answers, may have it).
        """
        if revision is None:
            return self.app.agent(name)
        built = self._built.get((name, revision))
        if built is not None:
            self._built.move_to_end((name, revision))
            return built[0]
        stored = await self.store.read(name, revision)
        if stored is None or stored.definition is None:
            raise AgentNotFoundError(f"runtime agent {name!r} has no revision {revision} in the store")
        return self._build(stored, strict=False)

    def _build(self, stored: AgentRevision, *, strict: bool) -> Agent:
        """The agent of a stored revision, built once per process (the App does not change under it)."""
        key = (stored.name, stored.revision)
        built = self._built.get(key)
        if built is None:
            assert stored.definition is not None
            built = _built(self.app, stored.definition, stored.revision)
            self._built[key] = built
            while len(self._built) > self._kept:
                self._built.popitem(last=False)
        self._built.move_to_end(key)
        agent, issues = built
        if strict and issues:
            raise _refuse(stored.name, issues)
        return agent

    def _not_found(self, name: str, stored: AgentRevision | None) -> AgentNotFoundError:
        if stored is not None:
            code = ", ".join(repr(a) for a in sorted(self.app.agents)) or "none"
            return AgentNotFoundError(
                f"agent {name!r} was removed (revision {stored.revision}): put it again to run it; "
                f"this app serves {code} in code"
            )
        try:
            self.app.agent(name)
        except AgentNotFoundError as error:  # the App's own message, as before agents were put
            return error
        return AgentNotFoundError(f"agent {name!r} is in code, not defined at runtime")

    # ---- the engine's putAgent, removeAgent, getAgent, listAgents -----------------------------------

    async def put_agent(
        self,
        name: str,
        definition: Mapping[str, Any] | AgentDefinition,
        *,
        by: Invoker | None = None,
        request_id: str | None = None,
    ) -> AgentPutResult:
        """Checks ``definition`` against the App and stores it as ``name``'s next revision.

        A definition equal to the latest revision's writes nothing and answers that revision.

        Raises:
            ChamviValidationError: the name or the definition is invalid (``issues`` by field path).
            ConflictError: an agent in code has the name.
        """
        name = checked_agent_name(name)
        if name in self.app.agents:
            raise ConflictError(
                f"agent {name!r} is defined in code: a runtime agent takes another name "
                "(an agent in code changes with a deploy)"
            )
        checked = parse_definition(name, definition)
        build_agent(self.app, checked, 0, strict=True)
        async with self._writing:  # one writer per process; the store settles races between processes
            for _ in range(WRITE_ATTEMPTS):
                previous = await self.store.latest(name)
                if previous is not None and previous.definition == checked:
                    self._remember(name, previous)
                    return AgentPutResult(agent=_runtime_info(previous), created=False, changed=False)
                stored = AgentRevision(
                    name=name,
                    revision=(previous.revision if previous is not None else 0) + 1,
                    definition=checked,
                    created_at=datetime.now(UTC),
                    by=_author(by),
                    request_id=request_id,
                )
                if await self.store.create(stored):
                    self._remember(name, stored)
                    created = previous is None or previous.removed
                    return AgentPutResult(agent=_runtime_info(stored), created=created)
        raise ConflictError(f"agent {name!r}: other writers kept taking the next revision; put it again")

    async def remove_agent(
        self, name: str, *, by: Invoker | None = None, request_id: str | None = None
    ) -> int:
        """Makes ``name`` unavailable for new runs; runs already going finish on their revision.

        Returns:
            The number of the revision that removed it.

        Raises:
            ConflictError: an agent in code has the name (a deploy removes it).
            AgentNotFoundError: no live runtime agent has the name.
        """
        if name in self.app.agents:
            raise ConflictError(f"agent {name!r} is defined in code: remove it from the App and deploy")
        if not is_valid_name(name):
            raise self._not_found(name, None)
        async with self._writing:
            for _ in range(WRITE_ATTEMPTS):
                previous = await self.store.latest(name)
                mine = previous is not None and request_id is not None and previous.request_id == request_id
                if previous is not None and previous.removed and mine:
                    return previous.revision  # this very remove, retried after it was written
                if previous is None or previous.removed:
                    raise self._not_found(name, previous)
                stored = AgentRevision(
                    name=name,
                    revision=previous.revision + 1,
                    created_at=datetime.now(UTC),
                    by=_author(by),
                    request_id=request_id,
                )
                if await self.store.create(stored):
                    self._remember(name, stored)
                    return stored.revision
        raise ConflictError(f"agent {name!r}: other writers kept taking the next revision; remove it again")

    async def get_agent(self, name: str, revision: int | None = None) -> AgentInfo:
        """``name`` in code, or its latest runtime revision (or ``revision``) with its definition.

        Raises:
            AgentNotFoundError: no such agent (or revision; a removal's is none).
        """
        code = self.app.agents.get(name)
        if code is not None and revision is None:
            return _code_info(self.app, code)
        if not is_valid_name(name):
            raise self._not_found(name, None)
        stored = await (self.store.read(name, revision) if revision is not None else self.store.latest(name))
        if stored is None or stored.definition is None:
            if revision is not None:
                raise AgentNotFoundError(f"agent {name!r} has no revision {revision} with a definition")
            raise self._not_found(name, stored)
        return _runtime_info(stored, with_definition=True)

    async def list_agents(self) -> list[AgentInfo]:
        """Every agent new runs may start: the App's by name, then the live runtime ones by name.

        A runtime agent whose name an agent in code took since (a deploy) is left out: the code wins.
        """
        code = [_code_info(self.app, self.app.agents[name]) for name in sorted(self.app.agents)]
        runtime = [
            _runtime_info(stored)
            for stored in await self.store.latest_all()
            if stored.definition is not None and stored.name not in self.app.agents
        ]
        return [*code, *runtime]

    async def check(self, name: str) -> None:
        """Refuses a name new runs cannot start (the HTTP API's dispatch check).

        Raises:
            AgentNotFoundError: neither the App nor a live runtime revision has the name.
        """
        if name in self.app.agents:
            return
        stored = await self.latest(name) if is_valid_name(name) else None
        if stored is None or stored.definition is None:
            raise self._not_found(name, stored)
