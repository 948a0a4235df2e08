"""``wrap_tools_for_run``: an agent's tools run outside a worker, the way a run's tool calls are.

The seed's ``wrapToolsForRun(tools, ctx, store, { allow?, hooks? })``: each call goes through the
same procedure as a tool activity (``chamvi._tool_runner.call_tool``): the input's validation,
``before_tool_execution``, the taint guard, the recorded effect and ``already_applied``, the tool,
``after_tool_execution``, and the taint a result brings. What a worker takes from the run (its
trigger, its recorded effects, its taint, its files) comes from the arguments here instead, so a
script, a test or a workflow of your own runs chamvi tools with their policy, hooks and effects.

What Temporal gives a run is not here: nothing waits for a person (an ``approve()`` nobody answered
yet answers ``status="approval"``; call again with ``decisions=[...]``), nothing is retried, and
``ctx.dispatch`` / ``ctx.wait_for`` are refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from chamvi._run_context import EffectLedger, RunContext
from chamvi._tool_runner import CallScope, call_tool
from chamvi.agents import AgentHooks, AgentTrust
from chamvi.app import App
from chamvi.artifacts import ArtifactStore, RunArtifacts
from chamvi.channels import Channel
from chamvi.context import Provided
from chamvi.errors import ToolNotAllowedError
from chamvi.models import ApprovalDecision, Artifact, ToolResult, TriggerEnvelope
from chamvi.tools import Tool

if TYPE_CHECKING:
    from chamvi.state.access import AgentStateAccess


class ToolsForRun(Mapping[str, "RunTool"]):
    """The wrapped tools of one run, by name: ``await tools["lookup"]({"order_id": "A1"})``.

    Attributes:
        effects: every effect recorded so far (the store given, or one of its own), by key: a call
            whose effect is recorded answers the recorded result and runs nothing.
        taint: where untrusted content first reached the run (``tool:<name>``), if it did; from then
            on, guarded tools need an approval (or are denied).
        artifacts: the files the calls put, in order.
    """

    def __init__(
        self,
        tools: Sequence[Tool] | Mapping[str, Tool],
        *,
        run: RunContext,
        channels: Mapping[str, Channel],
        provided: Provided,
        artifacts: ArtifactStore,
        state: AgentStateAccess | None,
        effects: MutableMapping[str, Any],
        allow: Callable[[str], bool] | None,
        hooks: AgentHooks,
        trust: AgentTrust,
        taint: str | None,
        tools_context: Mapping[str, Any],
    ) -> None:
        items = tools.values() if isinstance(tools, Mapping) else tools
        self._tools = {t.name: RunTool(t, self) for t in items}
        self._run = run
        self._channels = channels
        self._provided = provided
        self._store = artifacts
        self._state = state
        self._allow = allow
        self._hooks = hooks
        self._trust = trust
        self._tools_context = tools_context
        self._calls = 0
        self.effects = effects
        self.taint = taint
        self.artifacts: list[Artifact] = []

    def __getitem__(self, name: str) -> RunTool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    async def call(
        self, tool: Tool, arguments: Mapping[str, Any], decisions: Sequence[ApprovalDecision] = ()
    ) -> ToolResult:
        """One call of ``tool`` (see :meth:`RunTool.__call__`)."""
        if self._allow is not None and not self._allow(tool.name):
            raise ToolNotAllowedError(f"tool {tool.name!r} is not allowed for this run: allow() refused it")
        self._calls += 1
        run = RunContext(
            run_id=self._run.run_id,
            agent=self._run.agent,
            trigger=self._run.trigger,
            cancellation=self._run.cancellation,
            step=self._run.step,
            tool_call_id=f"call-{self._calls}",
        )

        async def recorded(key: str) -> tuple[bool, Any]:
            return (True, self.effects[key]) if key in self.effects else (False, None)

        async def record(key: str, result: Any) -> None:
            self.effects[key] = result

        scope = CallScope(
            run=run,
            channels=self._channels,
            effects=EffectLedger(recorded, record),
            decisions=list(decisions),
            tainted=self.taint is not None,
            provided=self._provided,
            artifacts=RunArtifacts(self._store, run.run_id, len(self.artifacts)),
            state=self._state,
        )
        result = await call_tool(
            tool,
            dict(arguments),
            scope,
            hooks=self._hooks,
            trust=self._trust,
            tool_context=self._tools_context.get(tool.name),
        )
        self.effects.update(result.effects)
        self.artifacts.extend(result.artifacts)
        if result.taint is not None and self.taint is None:
            self.taint = result.taint
        return result


class RunTool:
    """One tool of a :class:`ToolsForRun`."""

    def __init__(self, tool: Tool, run: ToolsForRun) -> None:
        self.tool = tool
        self._run = run

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    async def __call__(
        self, arguments: Mapping[str, Any] | None = None, *, decisions: Sequence[ApprovalDecision] = ()
    ) -> ToolResult:
        """Calls the tool with ``arguments`` (its input's fields), as a run's tool call would.

        Args:
            arguments: the input, as a model would give it; validated by the tool's input model.
            decisions: the answers to the call's ``approve()`` calls, in order (none: the first
                ``approve()`` answers ``status="approval"`` with the request).

        Returns:
            What the run would record: ``status`` (``ok``, ``error``, ``fatal``, ``approval``),
            ``output`` or ``error``, the effects recorded and the taint.

        Raises:
            ToolNotAllowedError: ``allow`` refused the tool.
        """
        return await self._run.call(self.tool, arguments or {}, decisions)


def wrap_tools_for_run(
    tools: Sequence[Tool] | Mapping[str, Tool],
    *,
    run_id: str,
    agent: str = "",
    trigger: TriggerEnvelope | None = None,
    channels: Sequence[Channel] | Mapping[str, Channel] = (),
    provided: App | Provided | None = None,
    artifacts: ArtifactStore | None = None,
    state: AgentStateAccess | None = None,
    effects: MutableMapping[str, Any] | None = None,
    allow: Callable[[str], bool] | None = None,
    hooks: AgentHooks | None = None,
    trust: AgentTrust | None = None,
    taint: str | None = None,
    tools_context: Mapping[str, Any] | None = None,
) -> ToolsForRun:
    """``tools`` wrapped for one run: policy, hooks, effects and taint as in a worker (see the module).

    Args:
        tools: the tools (a list, or by name).
        run_id: the run the calls belong to: default effect keys and artifact ids carry it.
        agent: the agent's name, as ``ctx.run.agent`` reads it.
        trigger: the run's trigger (``ctx.run.trigger``: its invoker, channel and address).
        channels: the channels ``ctx.channels`` finds.
        provided: what ``inject`` reads: an App's provided values, or a :class:`Provided`.
        artifacts: where ``ctx.artifacts`` keeps files; by default this process's memory.
        state: the agent's state (``ctx.state``); none by default.
        effects: the effect store, by key; pass the same mapping to a later wrap of the same run and
            a recorded effect is not applied again. A fresh one by default.
        allow: re-checks each call by tool name; a refused call raises ``ToolNotAllowedError``
            (e.g. ``lambda name: agent.allows(name, PolicyRun(...))``).
        hooks: ``before_tool_execution`` / ``after_tool_execution`` around every call.
        trust: the agent's classification of its tools and what a guarded call does once tainted.
        taint: the run's taint so far (None: untainted).
        tools_context: per tool name, the configuration a third-party tool reads as
            ``ctx.tool_context`` (validated already: the tool's ``context_schema`` instances).
    """
    run = RunContext(
        run_id=run_id,
        agent=agent,
        trigger=trigger or TriggerEnvelope(),
        cancellation=asyncio.Event(),
        step=0,
        tool_call_id="",
    )
    by_name = dict(channels) if isinstance(channels, Mapping) else {c.name: c for c in channels}
    values = provided.provided if isinstance(provided, App) else provided
    return ToolsForRun(
        tools,
        run=run,
        channels=by_name,
        provided=values if values is not None else Provided(),
        artifacts=artifacts or ArtifactStore.memory(),
        state=state,
        effects=effects if effects is not None else {},
        allow=allow,
        hooks=hooks or AgentHooks(),
        trust=trust or AgentTrust(),
        taint=taint,
        tools_context=tools_context or {},
    )
