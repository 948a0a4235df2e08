"""An ``AgentRun``'s tools: ``chamvi.list_mcp_tools`` once, then ``chamvi.call_tool`` per tool call.

A tool call's activity may return before the tool's result, asking the run for something first:
an extraction (``chamvi.extract``), a run it started to end (``chamvi.wait_for_run``), or a
person's answer (the ``approve`` signal or ``answer_approval`` update, waited on with the
request's timeout: :class:`~._approvals.ApprovalWaits`). The run does it, then calls
``chamvi.call_tool`` again with what it got, until the tool's result; the ``tool`` step, and a
``wait`` step per approval, are what the run's page and ``chamvi runs show`` list.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow

from ._calls import RunFailed, call_activity
from ._run_record import RunRecord

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.errors import FatalToolError, InvalidAgentDefinitionError
    from chamvi.models import (
        AgentSpec,
        ApprovalDecision,
        ExtractInput,
        ExtractionRequest,
        ExtractResult,
        McpListRequest,
        McpToolList,
        Message,
        RunWaitRequest,
        StepView,
        ToolCall,
        ToolRequest,
        ToolResult,
        approval_id,
        tool_output_parts,
    )
    from chamvi.retry import DEFAULT_TOOL_RETRY, MCP_LISTING_FAILURES, activity_policy


class ToolCalls(RunRecord):
    """The MCP tool listing and the ``chamvi.call_tool`` steps of an ``AgentRun``, approvals included."""

    _wait_for_run: Callable[[AgentSpec, int, ToolCall, RunWaitRequest], Awaitable[None]]
    """The ``chamvi.wait_for_run`` call a tool call may ask for: ``AgentRunWorkflow`` defines it,
    beside the timeout it is scheduled with."""

    async def _list_mcp_tools(self, spec: AgentSpec) -> None:
        """Lists each MCP server's tools once, so the run offers the same tools from first step to last.

        A name taken twice (by the agent's own tool or another server) would make calls ambiguous:
        the run fails naming both, as it does when the agent's ``trust=`` classifies a tool nobody
        lists. An agent without MCP servers schedules nothing here, so runs recorded before MCP
        tools existed replay unchanged.
        """
        owners = {t.name: "the agent's own tools" for t in spec.tools}
        for server in spec.mcp_servers:
            listing = await call_activity(
                c.ACTIVITY_LIST_MCP_TOOLS,
                McpListRequest(server=server),
                McpToolList,
                start_to_close=timedelta(seconds=spec.tool_timeout_seconds),
                heartbeat=timedelta(seconds=spec.tool_heartbeat_seconds),
                retry_policy=activity_policy(spec.tool_retry, DEFAULT_TOOL_RETRY, MCP_LISTING_FAILURES),
                summary=f"list the tools of MCP server {server}",
            )
            for tool in listing.tools:
                if tool.name in owners:
                    raise RunFailed.of(
                        InvalidAgentDefinitionError(
                            f"tool {tool.name!r} of MCP server {server!r} has the name of one of "
                            f"{owners[tool.name]}: leave one out with mcp_server(tools=[...])"
                        )
                    )
                owners[tool.name] = f"the tools of MCP server {server!r}"
                self._mcp_tools.append(tool)
        unknown = [name for name in spec.classified_tools if name not in owners]
        if spec.mcp_servers and unknown:
            raise RunFailed.of(
                InvalidAgentDefinitionError(
                    "the agent's trust names tools that neither it nor its MCP servers have: "
                    f"{', '.join(map(repr, unknown))} (its tools are {', '.join(map(repr, owners))})"
                )
            )

    async def _call_tool(self, spec: AgentSpec, step: int, call: ToolCall) -> None:
        decisions: list[ApprovalDecision] = []
        waits = 0
        started = workflow.now()
        listed = next((t for t in self._mcp_tools if t.name == call.name), None)
        while True:
            result = await call_activity(
                c.ACTIVITY_CALL_TOOL,
                ToolRequest(
                    run_id=workflow.info().workflow_id,
                    agent=spec.name,
                    step=step,
                    call=call,
                    trigger=self._trigger_without_payload(),
                    decisions=decisions,
                    tainted=self._taint is not None,
                    mcp_server=listed.server if listed is not None else None,
                    mcp_hints=listed.hints if listed is not None else None,
                    artifact_count=self._artifact_count,
                    skills_version=spec.skills_version,
                    approval_waits=waits,
                    revision=spec.revision,
                ),
                ToolResult,
                start_to_close=timedelta(seconds=spec.tool_timeout_seconds),
                heartbeat=timedelta(seconds=spec.tool_heartbeat_seconds),
                retry_policy=self._retry_policy(spec, call.name),
                summary=f"step {step}: {call.name}",
            )
            self._effects.update(result.effects)
            if result.taint is not None:
                self._mark_tainted(result.taint)
            if result.status == "extraction" and result.extraction is not None:
                await self._extract(spec, step, call, result.extraction)
                continue
            if result.status == "wait" and result.wait is not None:
                await self._wait_for_run(spec, step, call, result.wait)
                continue
            if result.status != "approval" or result.approval is None:
                break
            request = result.approval
            decision = await self._approvals.wait(
                step,
                call,
                approval_id(step, call.id, waits),
                request,
                steps=self._steps,
                set_status=self._set_status,
            )
            waits += 1
            decision.input_digest = request.input_digest
            if request.index is None:  # a call recorded before decisions were bound to their input
                decisions.append(decision)
            else:  # later answers were given for an input the call no longer has
                decisions = [*decisions[: request.index], decision]
        self._artifact_count += len(result.artifacts)
        view = StepView(
            index=step,
            kind="tool",
            started_at=started,
            ended_at=workflow.now(),
            tool=call.name,
            tool_call_id=call.id,
            input=call.arguments,
            output=result.output,
            error=result.error,
        )
        self._steps.append(view)
        self._show_details()
        if result.status == "fatal":
            message = result.error.message if result.error else "a tool failed the run"
            raise RunFailed.of(FatalToolError(message))
        # a result made of parts (artifact_file_part) reaches the model as parts, by reference
        parts = tool_output_parts(result.output) if result.status == "ok" else None
        if parts is not None:
            content = None
        elif result.status == "ok":
            content = result.output if isinstance(result.output, str) else json.dumps(result.output)
        else:
            content = f"{result.error.code}: {result.error.message}" if result.error else "tool error"
        self._messages.append(
            Message(
                role="tool",
                tool_call_id=call.id,
                name=call.name,
                content=content,
                is_error=result.status != "ok",
                parts=parts or [],
            )
        )

    async def _extract(self, spec: AgentSpec, step: int, call: ToolCall, request: ExtractionRequest) -> None:
        """Makes the extraction a tool call asked for and records it where the call will find it."""
        self._extracting[request.key] = request
        try:
            extracted = await call_activity(
                c.ACTIVITY_EXTRACT,
                ExtractInput(
                    run_id=workflow.info().workflow_id,
                    agent=spec.name,
                    step=step,
                    key=request.key,
                    revision=spec.revision,
                ),
                ExtractResult,
                start_to_close=timedelta(seconds=spec.model_timeout_seconds),
                retry_policy=self._retry_policy(spec, None),
                summary=f"step {step}: extract for {call.name}",
            )
        finally:
            del self._extracting[request.key]
        self._effects[request.key] = extracted.output
        self._usage = self._usage + extracted.usage
        if request.taints:  # before the call that asked reads it
            self._mark_tainted(f"extract:{call.name}")
