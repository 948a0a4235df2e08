"""The tool call of one step: validation, effects, approvals, taint, and errors for the model."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_jsonable_python
from temporalio import activity

from chamvi.agents import AgentHooks, ToolCallInfo
from chamvi.app import App
from chamvi.channels import ChannelAccess
from chamvi.constants import ACTIVITY_CALL_TOOL, QUERY_EFFECT, QUERY_TRIGGER
from chamvi.errors import ChamviError, FatalToolError, ToolDeniedError, ToolNotAllowedError
from chamvi.models import EffectQuery, EffectRecord, ErrorInfo, ToolRequest, ToolResult, TriggerEnvelope
from chamvi.permissions import PolicyRun
from chamvi.tools import ApprovalRequired, EffectLedger, Predicate, RunContext, Tool, ToolContext, approve


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _holds(flag: Predicate, arguments: BaseModel, ctx: ToolContext) -> bool:
    if isinstance(flag, bool):
        return flag
    return bool(await _maybe_await(flag(arguments, ctx)))


async def _run_effect(tool: Tool, arguments: BaseModel, ctx: ToolContext) -> Any:
    """Recorded result first, then ``already_applied``, then the function; record on success."""
    assert tool.effect is not None
    key_fn = tool.effect.effect_key
    key = key_fn(arguments, ctx) if key_fn is not None else tool.default_effect_key(ctx.run.run_id, arguments)
    found, recorded = await ctx.effects.lookup(key)
    if found:
        return recorded
    if tool.effect.already_applied is not None:
        applied = await _maybe_await(tool.effect.already_applied(key, arguments))
        if applied is not None:
            ctx.effects.record(key, applied)
            return applied
    result = await tool.invoke(arguments, ctx)
    ctx.effects.record(key, result)
    return result


def _error(error: BaseException) -> ErrorInfo:
    if isinstance(error, ChamviError):
        return ErrorInfo(code=error.code, message=error.message)
    return ErrorInfo(code="tool_error", message=f"{type(error).__name__}: {error}")


HEARTBEAT_SECONDS = 2.0


class ToolActivities:
    def __init__(self, app: App, max_runs: int = 256) -> None:
        self.app = app
        self._triggers: OrderedDict[str, TriggerEnvelope] = OrderedDict()
        self._max_runs = max_runs

    async def _trigger(self, request: ToolRequest) -> TriggerEnvelope:
        """The run's whole trigger envelope: payloads stay out of every tool call's input."""
        envelope = self._triggers.get(request.run_id)
        if envelope is None:
            handle = activity.client().get_workflow_handle(request.run_id)
            envelope = await handle.query(QUERY_TRIGGER, result_type=TriggerEnvelope)
            self._triggers[request.run_id] = envelope
            while len(self._triggers) > self._max_runs:
                self._triggers.popitem(last=False)
        self._triggers.move_to_end(request.run_id)
        return envelope

    @activity.defn(name=ACTIVITY_CALL_TOOL)
    async def call_tool(self, request: ToolRequest) -> ToolResult:
        agent = self.app.agent(request.agent)
        tool = agent.tools.get(request.call.name)
        run_view = PolicyRun(request.run_id, agent.name, request.trigger)
        if tool is not None and not agent.allows(tool.name, run_view):
            error = ToolNotAllowedError(
                f"tool {tool.name!r} is not allowed for this run by the agent's tool policy"
            )
            return ToolResult(status="error", error=_error(error))
        if tool is None:
            offered = ", ".join(repr(n) for n in agent.tools) or "none"
            error = ToolNotAllowedError(
                f"tool {request.call.name!r} is not available: this agent offers {offered}"
            )
            return ToolResult(status="error", error=_error(error))
        try:
            arguments = tool.parse_input(request.call.arguments)
        except PydanticValidationError as error:
            return ToolResult(
                status="error",
                error=ErrorInfo(code="validation_error", message=f"invalid input for {tool.name!r}: {error}"),
            )
        cancellation = asyncio.Event()
        ledger = EffectLedger(lambda key: self._recorded_effect(request.run_id, key))
        run = RunContext(
            run_id=request.run_id,
            agent=agent.name,
            trigger=await self._trigger(request),
            cancellation=cancellation,
            step=request.step,
            tool_call_id=request.call.id,
        )
        ctx = ToolContext(
            run=run,
            channels=ChannelAccess(self.app.channels),
            effects=ledger,
            decisions=list(request.decisions),
            provided=self.app.provided,
        )
        heartbeat = asyncio.create_task(self._heartbeat(cancellation))
        try:
            return await self._call(agent.hooks, tool, arguments, ctx, request.tainted)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _call(
        self, hooks: AgentHooks, tool: Tool, arguments: BaseModel, ctx: ToolContext, tainted: bool
    ) -> ToolResult:
        """Hooks, then the taint guard on the final input, then the effect lookup, then the tool."""
        status: str = "ok"
        output: Any = None
        error: ErrorInfo | None = None
        info = ToolCallInfo(tool.name, ctx.run.tool_call_id, arguments.model_dump(mode="json"))
        try:
            if hooks.before_tool_execution is not None:
                rewritten = await _maybe_await(hooks.before_tool_execution(info, ctx))
                arguments = tool.parse_input(rewritten)
                info = ToolCallInfo(tool.name, ctx.run.tool_call_id, arguments.model_dump(mode="json"))
            if tainted and await _holds(tool.trust.guard_when_tainted, arguments, ctx):
                decision = await approve(
                    ctx,
                    title=f"The run read untrusted content: allow {tool.name!r}?",
                    body=json.dumps(arguments.model_dump(mode="json"), indent=2),
                )
                if not decision.approved:
                    raise ToolDeniedError(
                        f"{tool.name!r} was denied: "
                        f"{decision.reason or 'the run is tainted and nobody approved'}"
                    )
            output = await (_run_effect(tool, arguments, ctx) if tool.effect else tool.invoke(arguments, ctx))
            if hooks.after_tool_execution is not None:
                output = to_jsonable_python(await _maybe_await(hooks.after_tool_execution(info, output, ctx)))
        except ApprovalRequired as required:
            return ToolResult(status="approval", approval=required.request, effects=ctx.effects.new)
        except FatalToolError as fatal:
            status, error = "fatal", _error(fatal)
        except Exception as failure:
            status, error = "error", _error(failure)
        if await _holds(tool.trust.taint, arguments, ctx):
            ctx.mark_tainted(f"tool:{tool.name}")
        taint = ctx._taint
        return ToolResult(status=status, output=output, error=error, effects=ctx.effects.new, taint=taint)  # type: ignore[arg-type]

    async def _recorded_effect(self, run_id: str, key: str) -> tuple[bool, Any]:
        handle = activity.client().get_workflow_handle(run_id)
        record = await handle.query(QUERY_EFFECT, EffectQuery(key=key), result_type=EffectRecord)
        return record.found, record.result

    @staticmethod
    async def _heartbeat(cancellation: asyncio.Event) -> None:
        """Keeps a long tool call alive and lets the server notice a killed worker quickly."""
        timeout = activity.info().heartbeat_timeout
        # often enough that a cancelled or timed-out run stops its tool within seconds
        interval = min(timeout.total_seconds() / 3, HEARTBEAT_SECONDS) if timeout else HEARTBEAT_SECONDS
        waiter = asyncio.ensure_future(activity.wait_for_cancelled())
        try:
            while not waiter.done():
                # the first heartbeat only after an interval: a quick tool call sends none
                await asyncio.wait([waiter], timeout=interval)
                if not waiter.done():
                    activity.heartbeat()
            cancellation.set()
        finally:
            waiter.cancel()
