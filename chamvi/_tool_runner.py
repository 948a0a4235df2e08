"""One tool call, start to end: policy, input, hooks, the taint guard, approvals and effects.

Independent of Temporal: what the call needs from its run (the trigger envelope, effects recorded
by earlier calls) comes through :class:`RunAccess`, so the whole procedure is tested without a
server and the tool activity only adapts it (``activities.tools``).

The order is the seed's: the tool policy, the input's validation, ``before_tool_execution``, the
taint guard on the final input, the recorded effect (then ``already_applied``), the tool, then
``after_tool_execution``; a result that marks the run untrusted does so before the model sees it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_jsonable_python

from chamvi._constants import TOOL_RESULT_MAX_BYTES
from chamvi._infrastructure import watching
from chamvi._run_context import (
    ApprovalRequired,
    Approvals,
    EffectLedger,
    ExtractionRequired,
    LinkedRuns,
    RunContext,
    RunWaitRequired,
)
from chamvi.agents import Agent, AgentHooks, AgentTrust, ToolCallInfo
from chamvi.approval_tokens import ApprovalTokens
from chamvi.artifacts import RunArtifacts
from chamvi.channels import Channel, ChannelAccess
from chamvi.context import Provided
from chamvi.errors import (
    ChamviError,
    ChamviValidationError,
    ChannelUnavailableError,
    FatalToolError,
    InfrastructureUnavailableError,
    ToolDeniedError,
    ToolNotAllowedError,
    ToolResultTooLargeError,
    validation_issues,
)
from chamvi.mcp._client import as_tool
from chamvi.models import (
    ApprovalDecision,
    ApprovalRequest,
    ErrorInfo,
    FilePart,
    ImagePart,
    RunInput,
    ToolRequest,
    ToolResult,
    TriggerEnvelope,
    tool_output_parts,
)
from chamvi.permissions import PolicyRun
from chamvi.tools import Predicate, Tool, ToolContext, approve
from chamvi.worker_state import AppRuntime

if TYPE_CHECKING:
    from chamvi.state.access import AgentStateAccess

log = logging.getLogger(__name__)


class RunAccess(Protocol):
    """What a tool call reads from its run, outside the call's own input."""

    async def trigger(self) -> TriggerEnvelope:
        """The run's whole trigger envelope, payload included."""
        ...

    async def recorded_effect(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` when an earlier call of the run recorded ``key``."""
        ...

    async def record_effect(self, key: str, result: Any) -> None:
        """Records ``key`` in the run now, before the call returns (an emit, once ``out`` returned)."""
        ...

    async def start(self, run_input: RunInput) -> str:
        """Starts a run (``ctx.dispatch``) as any dispatch does; answers its id."""
        ...


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _holds(flag: Predicate, arguments: BaseModel, ctx: ToolContext) -> bool:
    if isinstance(flag, bool):
        return flag
    return bool(await _maybe_await(flag(arguments, ctx)))


def _error(error: BaseException) -> ErrorInfo:
    if isinstance(error, ChamviValidationError) and error.issues:
        return ErrorInfo(code=error.code, message=error.message, issues=list(error.issues))
    if isinstance(error, ChamviError):
        return ErrorInfo(code=error.code, message=error.message)
    return ErrorInfo(code="tool_error", message=f"{type(error).__name__}: {error}")


_RETRIED: tuple[type[ChamviError], ...] = (ChannelUnavailableError, InfrastructureUnavailableError)
"""What the call raises rather than reports, for Temporal to run it again: nothing the model can act on."""


def _refused(error: ChamviError) -> ToolResult:
    return ToolResult(status="error", error=_error(error))


class ToolRunner:
    """Runs the tool calls of an app's agents, on one worker's runtime.

    Args:
        runtime: the worker's holdings for the app (its state store, artifacts, provided values and
            the tool sets its factories built); ``AppRuntime(app)`` outside a worker.
    """

    def __init__(self, runtime: AppRuntime) -> None:
        self.runtime = runtime
        self.app = runtime.app

    async def run(self, request: ToolRequest, access: RunAccess, cancellation: asyncio.Event) -> ToolResult:
        """The result of one tool call, as the workflow records it; never raises for a tool's failure."""
        with self.runtime.serving():
            return await self._run(request, access, cancellation)

    async def _run(self, request: ToolRequest, access: RunAccess, cancellation: asyncio.Event) -> ToolResult:
        agent = await self.runtime.agent(request.agent, request.revision)
        policy_run = PolicyRun(request.run_id, agent.name, request.trigger)
        run_tools = self.runtime.run_tools(agent, policy_run)
        tools = run_tools.tools
        tool = tools.get(request.call.name) or self._mcp_tool(agent, request)
        if tool is None:
            offered = ", ".join(repr(n) for n in tools) or "none"
            servers = "".join(f", and the tools MCP server {s!r} listed" for s in agent.mcp_servers)
            return _refused(
                ToolNotAllowedError(
                    f"tool {request.call.name!r} is not available: this agent offers {offered}{servers}"
                )
            )
        if not agent.allows(tool.name, policy_run):
            return _refused(
                ToolNotAllowedError(
                    f"tool {tool.name!r} is not allowed for this run by the agent's tool policy"
                )
            )
        run = RunContext(
            run_id=request.run_id,
            agent=agent.name,
            trigger=await access.trigger(),
            cancellation=cancellation,
            step=request.step,
            tool_call_id=request.call.id,
            skills_version=request.skills_version,
        )
        effects = EffectLedger(access.recorded_effect, access.record_effect)
        scope = CallScope(
            run=run,
            channels=self.app.channels,
            effects=effects,
            decisions=request.decisions,
            tainted=request.tainted,
            provided=self.runtime.provided,
            artifacts=RunArtifacts(self.runtime.artifacts, request.run_id, request.artifact_count),
            state=self.runtime.state_of(agent),
            runs=LinkedRuns(run, effects, access, request.tainted),
            approval_waits=request.approval_waits,
            approval_tokens=self.runtime.approval_tokens,
        )
        return await call_tool(
            tool,
            request.call.arguments,
            scope,
            hooks=agent.hooks,
            trust=agent.trust,
            tool_context=run_tools.context.get(tool.name),
        )

    def _mcp_tool(self, agent: Agent, request: ToolRequest) -> Tool | None:
        """The MCP tool the run listed under this name, if the agent still uses that server and tool."""
        server = request.mcp_server
        if server is None or server not in agent.mcp_servers or server not in self.app.mcp_servers:
            return None
        declared = self.app.mcp_servers[server]
        if not declared.offers(request.call.name):
            return None
        return as_tool(declared, request.call.name, self.runtime.mcp_sessions, request.mcp_hints)


@dataclass(frozen=True)
class CallScope:
    """What one tool call gets from its run, in a worker or outside one (``wrap_tools_for_run``).

    Attributes:
        run: who and what started the run, and which call this is.
        channels: the channels ``ctx.channels`` finds, by name.
        effects: the effects recorded in the run so far, and where this call records its own.
        decisions: the answers this call's approvals were given so far, in order.
        tainted: whether the run read untrusted content before this call.
        provided: what ``inject`` reads.
        artifacts: the run's files (``ctx.artifacts``).
        state: the agent's state (``ctx.state``), if a store serves it.
        runs: the runs this call starts and waits for (``ctx.dispatch``), if it may.
        approval_waits: how many approval waits the run had for this call so far.
        approval_tokens: signs the tokens a channel's approval request carries, if the worker has
            a secret (``chamvi.approval_tokens``); without, requests name the run and approval only.
    """

    run: RunContext
    channels: Mapping[str, Channel]
    effects: EffectLedger
    decisions: list[ApprovalDecision]
    tainted: bool
    provided: Provided
    artifacts: RunArtifacts
    state: AgentStateAccess | None = None
    runs: LinkedRuns | None = None
    approval_waits: int = 0
    approval_tokens: ApprovalTokens | None = None


async def call_tool(
    tool: Tool,
    arguments: dict[str, Any],
    scope: CallScope,
    *,
    hooks: AgentHooks,
    trust: AgentTrust,
    tool_context: Any = None,
) -> ToolResult:
    """One call of ``tool``, from its input's validation to its recorded result (the seed's order).

    Never raises for the tool's own failure: it is the result's ``error``; only a channel that may
    take the message later (``ChannelUnavailableError``) and chamvi's own bookkeeping failing to reach
    the Temporal server or a store (``InfrastructureUnavailableError``, even if the tool caught it) are
    raised, for the call to run again.
    """
    try:
        parsed = tool.parse_input(arguments)
    except PydanticValidationError as error:
        issues = validation_issues(error.errors(include_input=False))
        return _refused(ChamviValidationError(f"invalid input for {tool.name!r}: {error}", issues=issues))
    approvals = Approvals(scope.decisions, waits=scope.approval_waits)
    approvals.bind(parsed.model_dump(mode="json"))
    channels = ChannelAccess(
        scope.channels,
        scope.run,
        scope.effects,
        approvals,
        tainted=scope.tainted,
        on_tainted=trust.on_tainted,
        approval_tokens=scope.approval_tokens,
    )
    ctx = ToolContext(
        run=scope.run,
        channels=channels,
        effects=scope.effects,
        approvals=approvals,
        provided=scope.provided,
        tool_context=tool_context,
        runs=scope.runs,
        run_artifacts=scope.artifacts,
        state_access=scope.state,
    )
    with watching() as failures:
        result = await _call(tool, parsed, ctx, scope.tainted, hooks, trust)
    if failures:
        raise failures[0]  # the tool caught it: the model must not read a result made without it
    return _within_payload_limit(_without_inline_bytes(result, tool.name), tool.name)


async def _call(
    tool: Tool,
    arguments: BaseModel,
    ctx: ToolContext,
    tainted: bool,
    hooks: AgentHooks,
    agent_trust: AgentTrust,
) -> ToolResult:
    trust = agent_trust.of(tool)
    status: str = "ok"
    output: Any = None
    error: ErrorInfo | None = None
    info = ToolCallInfo(tool.name, ctx.run.tool_call_id, arguments.model_dump(mode="json"))
    try:
        if hooks.before_tool_execution is not None:
            rewritten = await _maybe_await(hooks.before_tool_execution(info, ctx))
            try:
                arguments = tool.parse_input(rewritten)
            except PydanticValidationError as invalid:
                raise ChamviValidationError(
                    f"before_tool_execution rewrote the input of {tool.name!r} into one its schema "
                    f"refuses: {invalid}",
                    issues=validation_issues(invalid.errors(include_input=False)),
                ) from None
            info = ToolCallInfo(tool.name, ctx.run.tool_call_id, arguments.model_dump(mode="json"))
            ctx.approvals.bind(info.input)
        if tainted and await _holds(trust.guard_when_tainted, arguments, ctx):
            if agent_trust.on_tainted == "deny":
                raise ToolDeniedError(
                    f"{tool.name!r} was denied: the run read untrusted content, and this agent "
                    "refuses guarded tools from then on"
                )
            decision = await approve(
                ctx,
                title=f"The run read untrusted content: allow {tool.name!r}?",
                body=json.dumps(arguments.model_dump(mode="json"), indent=2),
            )
            if not decision.approved:
                raise ToolDeniedError(
                    f"{tool.name!r} was denied: {decision.reason or 'the run is tainted and nobody approved'}"
                )
        output = await (_run_effect(tool, arguments, ctx) if tool.effect else tool.invoke(arguments, ctx))
        if hooks.after_tool_execution is not None:
            output = to_jsonable_python(await _maybe_await(hooks.after_tool_execution(info, output, ctx)))
    except ApprovalRequired as required:
        # what the call put so far it puts again, under the same ids, when it runs again
        await _notify_source(ctx, tool.name, required.request)
        return ToolResult(status="approval", approval=required.request, effects=ctx.effects.new)
    except ExtractionRequired as required:
        return ToolResult(status="extraction", extraction=required.request, effects=ctx.effects.new)
    except RunWaitRequired as required:
        return ToolResult(status="wait", wait=required.request, effects=ctx.effects.new)
    except FatalToolError as fatal:
        status, error = "fatal", _error(fatal)
    except _RETRIED:
        raise  # the receiver or chamvi's own store may answer later: Temporal runs the call again
    except Exception as failure:
        status, error = "error", _error(failure)
    if await _holds(trust.taint, arguments, ctx):
        ctx.mark_tainted(f"tool:{tool.name}")
    return ToolResult(
        status=status,  # type: ignore[arg-type]
        output=output,
        error=error,
        effects=ctx.effects.new,
        taint=ctx.taint,
        artifacts=ctx.artifacts.new,
    )


async def _notify_source(ctx: ToolContext, tool: str, request: ApprovalRequest) -> None:
    """Tells the run's source channel that the run waits for a person, once per approval.

    Generic on purpose: which tool of which run waits, until when, how to answer; neither the call's
    arguments nor the request's title and body, which are often made of them (and may carry what
    untrusted content put there): ``chamvi runs show`` and ``GET /runs/{id}`` show those to whoever
    may answer. A request the tool already delivered through a channel (``handle.approve``) has the
    same key and is not sent again. A receiver that refuses for good costs a log line, not the
    approval: the run waits all the same.
    """
    source = ctx.channels.find_one()
    if source is None:
        return
    try:
        await source.notify_approval(
            title=f"tool {tool!r} of agent {ctx.run.agent!r}",
            body=None,
            timeout=timedelta(seconds=request.timeout_seconds),
            index=request.index or 0,
            required=False,
        )
    except _RETRIED:
        raise
    except Exception as error:
        log.warning(
            "run %s: the approval request could not be delivered through channel %r: %s",
            ctx.run.run_id,
            source.name,
            error,
        )


async def _run_effect(tool: Tool, arguments: BaseModel, ctx: ToolContext) -> Any:
    """Recorded result first, then ``already_applied``, then the function; record on success."""
    assert tool.effect is not None
    key_fn = tool.effect.effect_key
    key = key_fn(arguments, ctx) if key_fn is not None else tool.default_effect_key(ctx.run.run_id, arguments)
    ctx.effect_key = key
    found, recorded = await ctx.effects.lookup(key)
    if found:
        return recorded
    applied = await tool.effect.ask_applied(key, arguments, ctx)
    if applied is not None:
        ctx.effects.record(key, applied)
        return applied
    result = await tool.invoke(arguments, ctx)
    ctx.effects.record(key, result)
    return result


def _without_inline_bytes(result: ToolResult, tool: str) -> ToolResult:
    """A result of parts holding inline bytes becomes a tool error: history keeps references only.

    A result of image and file parts (``artifact_file_part``) reaches the model as those parts, the
    bytes read from the artifact store for each model call (``chamvi.models.parts``).
    """
    parts = tool_output_parts(result.output) if result.status == "ok" else None
    if parts is None or not any(p.data is not None for p in parts if isinstance(p, ImagePart | FilePart)):
        return result
    error = ChamviValidationError(
        f"the result of {tool!r} holds a part with inline data: a run's history keeps references only, "
        "so store the bytes with ctx.artifacts.put and return artifact_file_part(artifact)"
    )
    return result.model_copy(update={"status": "error", "output": None, "error": _error(error)})


def _within_payload_limit(result: ToolResult, tool: str) -> ToolResult:
    """A result Temporal could not store becomes a tool error the model can act on.

    Otherwise the activity's completion is refused by the server and the workflow task fails over
    and over. The effect keys recorded stay (the side effect happened and must not happen again), with
    a marker in place of results too large to keep.
    """
    size = len(result.model_dump_json().encode())
    if size <= TOOL_RESULT_MAX_BYTES:
        return result
    error = ToolResultTooLargeError(
        f"the result of {tool!r} is {size:,} bytes, over the limit of {TOOL_RESULT_MAX_BYTES:,} bytes "
        "(Temporal stores every tool result in the run's history): return less, or a reference to "
        "where the data is"
    )
    trimmed = result.model_copy(update={"status": "error", "output": None, "error": _error(error)})
    if len(trimmed.model_dump_json().encode()) > TOOL_RESULT_MAX_BYTES:
        marker = {"error": ToolResultTooLargeError.code}
        trimmed = trimmed.model_copy(update={"effects": dict.fromkeys(result.effects, marker)})
    return trimmed
