"""The ``AgentRun`` workflow: one agent run, one model activity and one tool activity per call.

Deterministic code only. The agent arrives as a serialisable ``AgentSpec`` from an activity; the
app's code (tools, models, channels) runs in activities.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from ._approvals import ApprovalWaits
from ._calls import RunFailed, call_activity, settled

with workflow.unsafe.imports_passed_through():
    from chamvi import constants as c
    from chamvi.errors import (
        BudgetExceededError,
        ChamviValidationError,
        FatalToolError,
        IncompleteResponseError,
        InvalidAgentDefinitionError,
        RunTimeoutError,
    )
    from chamvi.models import (
        AgentSpec,
        ApprovalAnswer,
        ApprovalDecision,
        DescribeAgentRequest,
        EffectQuery,
        EffectRecord,
        ErrorInfo,
        ExtractInput,
        ExtractionRequest,
        ExtractResult,
        LockRequest,
        McpListRequest,
        McpToolInfo,
        McpToolList,
        Message,
        ModelRequest,
        ModelResponse,
        RecordedEffect,
        RunInput,
        RunStatus,
        RunView,
        RunWaitRequest,
        StepView,
        Taint,
        ToolCall,
        ToolRequest,
        ToolResult,
        TranscriptQuery,
        TriggerEnvelope,
        Usage,
        approval_id,
        tool_output_parts,
    )
    from chamvi.retry import (
        AGENT_LOOKUP_FAILURES,
        DEFAULT_MODEL_RETRY,
        DEFAULT_TOOL_RETRY,
        MCP_LISTING_FAILURES,
        MODEL_CALL_FAILURES,
        TOOL_CALL_FAILURES,
        activity_policy,
        non_retryable,
    )
    from chamvi.run_details import current_details
    from chamvi.transcript import EMPTY_DIGEST, chain_digest

LOCAL_RETRY = RetryPolicy(maximum_attempts=5, non_retryable_error_types=non_retryable(AGENT_LOOKUP_FAILURES))


def envelope_message(run_input: RunInput) -> Message:
    """The trigger envelope as the run's first user message, a JSON block.

    The invoker stays out of it: who may do what is for tool policies, not for the model. A turn of
    a conversation starts with the person's message itself, as the recalled turns before it do.
    """
    if run_input.conversation is not None and isinstance(run_input.payload, str):
        return Message(role="user", content=run_input.payload)
    envelope = run_input.envelope().model_dump(mode="json", exclude_none=True, exclude={"invoker"})
    body = json.dumps(envelope, indent=2, sort_keys=True)
    return Message(role="user", content=f"Trigger:\n```json\n{body}\n```")


async def _cancel(task: asyncio.Task[None]) -> None:
    """Cancels the loop and collects how it ended, so nothing is reported as never retrieved."""
    task.cancel()
    await workflow.wait([task])
    if not task.cancelled():
        task.exception()


@workflow.defn(name=c.AGENT_RUN_WORKFLOW)
class AgentRunWorkflow:
    """One agent run (its id is the run id): the model and tool calls, approvals, budgets and taint.

    Its queries and search attributes are how the CLI, the HTTP API and the Temporal UI see a run.
    """

    def __init__(self) -> None:
        self._input: RunInput | None = None
        self._bare_trigger: TriggerEnvelope | None = None
        """The trigger without its payload, as every call's input carries it: built once per run."""
        self._spec: AgentSpec | None = None
        self._status = RunStatus.QUEUED
        self._messages: list[Message] = []
        self._sent_count = 0
        self._sent_digest = EMPTY_DIGEST
        self._steps: list[StepView] = []
        self._usage = Usage()
        self._output: Any = None
        self._error: ErrorInfo | None = None
        self._approvals = ApprovalWaits()
        self._taint: Taint | None = None
        self._effects: dict[str, Any] = {}
        self._artifact_count = 0
        """Artifacts the run holds (attachments, then what tools put): the next put numbers on."""
        self._mcp_tools: list[McpToolInfo] = []
        self._granted = False
        self._extracting: dict[str, ExtractionRequest] = {}
        self._policies: dict[str | None, RetryPolicy] = {}
        """Retry policies by tool name (None: the model call), built once per run from its spec."""
        self._created_at = workflow.now()
        self._started_at: Any = None
        self._ended_at: Any = None

    # ---- handlers ---------------------------------------------------------------------------

    @workflow.query(name=c.QUERY_RUN)
    def view(self) -> RunView:
        """The run as ``chamvi runs show`` and ``GET /runs/{id}`` show it (the ``run`` query)."""
        run_input = self._input or RunInput(agent="")
        return RunView(
            run_id=workflow.info().workflow_id,
            agent=run_input.agent,
            status=self._status,
            trigger=run_input.envelope(),
            concurrency_key=run_input.concurrency_key,
            parent_run_id=run_input.parent_run_id,
            steps=self._steps,
            usage=self._usage,
            output=self._output,
            error=self._error,
            waiting=self._approvals.waiting,
            taint=self._taint,
            created_at=self._created_at,
            started_at=self._started_at,
            ended_at=self._ended_at,
            conversation=run_input.conversation,
            agent_revision=self._spec.revision if self._spec is not None else None,
        )

    @workflow.query(name=c.QUERY_TRANSCRIPT)
    def transcript(self, query: TranscriptQuery) -> list[Message]:
        """The first messages of the run, for a model activity on a worker whose cache lacks them."""
        return self._messages[: query.upto]

    @workflow.query(name=c.QUERY_EXTRACTION)
    def extraction(self, query: EffectQuery) -> ExtractionRequest:
        """The extraction a tool call asked for, while the run makes it."""
        return self._extracting[query.key]

    @workflow.query(name=c.QUERY_TRIGGER)
    def trigger(self) -> TriggerEnvelope:
        """The whole trigger envelope, payload included, which tool calls read instead of carrying it."""
        return self._require_input().envelope()

    @workflow.query(name=c.QUERY_EFFECT)
    def effect(self, query: EffectQuery) -> EffectRecord:
        """An effect recorded by an earlier call of the run, asked by a tool call before it acts."""
        if query.key in self._effects:
            return EffectRecord(found=True, result=self._effects[query.key])
        return EffectRecord(found=False)

    @workflow.query(name=c.QUERY_MCP_TOOLS)
    def mcp_tools(self) -> list[McpToolInfo]:
        """The MCP tools the run listed at its start, which every model call offers the same."""
        return self._mcp_tools

    @workflow.signal(name=c.SIGNAL_APPROVE)
    def approve(self, raw: Any = None) -> None:
        """The answer of a person; a malformed, stale or unknown one is logged and ignored."""
        self._approvals.signalled(raw)

    @workflow.update(name=c.UPDATE_ANSWER_APPROVAL)
    def answer_approval(self, answer: ApprovalAnswer) -> None:
        """Like the ``approve`` signal, but a stale or unknown id is refused to the caller."""
        self._approvals.answer = answer.decision()

    @answer_approval.validator
    def _validate_answer(self, answer: ApprovalAnswer) -> None:
        # a refused update is final; the flag is what the caller (the temporal CLI) is shown
        self._approvals.validate(answer)

    @workflow.signal(name=c.SIGNAL_EFFECT_RECORDED)
    def effect_recorded(self, effect: RecordedEffect) -> None:
        """An effect a running tool call applied (an emit), kept before the call returns.

        Only state changes here, no command: histories recorded before this signal existed replay
        as they are.
        """
        self._effects[effect.key] = effect.result

    @workflow.signal(name=c.SIGNAL_LOCK_GRANTED)
    def concurrency_granted(self) -> None:
        """The run's concurrency key is its own now (the lock workflow's grant)."""
        self._granted = True

    # ---- run ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, run_input: RunInput) -> RunView:
        """Runs the agent until it answers, fails or is cancelled; the result leaves the steps out.

        Raises:
            ApplicationError: the run failed, typed by its code (``budget_exceeded``, ``timeout``, ...).
        """
        self._input = run_input
        self._bare_trigger = run_input.envelope().model_copy(update={"payload": None})
        self._artifact_count = len(run_input.attachments)
        run_id = workflow.info().workflow_id
        self._upsert(agent=run_input.agent, channel=run_input.channel)
        try:
            spec: AgentSpec = await settled(
                workflow.execute_local_activity(
                    c.ACTIVITY_DESCRIBE_AGENT,
                    DescribeAgentRequest(
                        agent=run_input.agent,
                        channel=run_input.channel,
                        run_id=run_id,
                        trigger=self._bare_trigger,
                    ),
                    result_type=AgentSpec,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=LOCAL_RETRY,
                )
            )
            self._spec = spec
            if run_input.concurrency_key is not None:
                await workflow.execute_local_activity(
                    c.ACTIVITY_ENQUEUE_LOCK,
                    LockRequest(key=run_input.concurrency_key, run_id=run_id),
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=LOCAL_RETRY,
                )
                await workflow.wait_condition(lambda: self._granted)
            self._started_at = workflow.now()
            self._set_status(RunStatus.RUNNING)
            if run_input.channel in spec.untrusted_channels:
                self._mark_tainted(f"channel:{run_input.channel}")
            if run_input.inherited_taint is not None:  # started by a tainted run
                self._mark_tainted(run_input.inherited_taint)
            self._messages.append(envelope_message(run_input))
            await self._run_within_timeout(spec)
            self._settle(RunStatus.COMPLETED)
        except RunFailed as failure:
            self._error = ErrorInfo(code=failure.code, message=failure.message, issues=failure.issues)
            self._settle(RunStatus.FAILED)
            # the run's own end, not an activity's: a run started with a retry policy is not run again
            raise ApplicationError(
                failure.message, {"code": failure.code}, type=failure.code, non_retryable=True
            ) from None
        except asyncio.CancelledError:
            self._error = ErrorInfo(code="cancelled", message="the run was cancelled")
            self._settle(RunStatus.CANCELLED)
            raise
        finally:
            if run_input.concurrency_key is not None:
                await self._release_lock(run_input.concurrency_key, run_id)
        # one payload, at most 2 MiB: a long run's steps stay readable through the `run` query
        return self.view().model_copy(update={"steps": []})

    async def _release_lock(self, key: str, run_id: str) -> None:
        handle = workflow.get_external_workflow_handle(c.LOCK_ID_PREFIX + key)
        try:
            await handle.signal(c.SIGNAL_LOCK_RELEASE, LockRequest(key=key, run_id=run_id))
        except Exception as error:  # the lock's own watchdog frees the key if this signal is lost
            workflow.logger.warning("could not release concurrency key %r: %s", key, error)

    async def _run_within_timeout(self, spec: AgentSpec) -> None:
        """Runs the loop under the budget's timeout, which restarts after every approval wait.

        The seed's timeout applies to each execution, and time spent waiting for a person is no
        execution: the clock stops while the run waits and starts afresh when it resumes.
        """
        loop = asyncio.create_task(self._loop(spec))
        try:
            while not loop.done():
                try:
                    await workflow.wait_condition(
                        lambda: loop.done() or self._approvals.waiting is not None,
                        timeout=timedelta(seconds=spec.budget.timeout_seconds),
                        timeout_summary="run timeout",
                    )
                except TimeoutError:
                    await _cancel(loop)
                    raise RunFailed.of(
                        RunTimeoutError(
                            f"the run took longer than its {spec.budget.timeout_seconds:g} s timeout"
                        )
                    ) from None
                if self._approvals.waiting is not None:
                    await workflow.wait_condition(lambda: loop.done() or self._approvals.waiting is None)
        except asyncio.CancelledError:
            await _cancel(loop)
            raise
        await loop

    async def _loop(self, spec: AgentSpec) -> None:
        await self._list_mcp_tools(spec)
        step = 0
        while True:
            response = await self._call_model(spec, step)
            message = response.message
            self._messages.append(message)
            if response.finish_reason == "error":  # the stream broke after the model began to write
                error = response.error or ErrorInfo(code="model_error", message="the model's stream failed")
                raise RunFailed(error.code, error.message)
            if response.finish_reason == "incomplete":  # none of this step's tool calls runs
                calls = len(message.tool_calls)
                raise RunFailed.of(
                    IncompleteResponseError(
                        "the model's stream closed without a finish reason, so its answer may be cut short"
                        + (f"; its {calls} tool call(s) did not run" if calls else "")
                    )
                )
            if response.finish_reason == "length":
                raise RunFailed.of(
                    IncompleteResponseError("the model's answer was cut off at its output token limit")
                )
            if not message.tool_calls:
                self._finish(spec, response)
                return
            for call in message.tool_calls:
                await self._call_tool(spec, step, call)
            step += 1
            if step >= spec.budget.max_steps:
                raise RunFailed.of(
                    BudgetExceededError(
                        f"max_steps ({spec.budget.max_steps}) reached while the model "
                        "still wanted to call tools"
                    )
                )
            if spec.budget.max_tokens is not None and self._usage.total_tokens >= spec.budget.max_tokens:
                raise RunFailed.of(
                    BudgetExceededError(
                        f"max_tokens ({spec.budget.max_tokens}) reached "
                        f"({self._usage.total_tokens} used) while "
                        "the model still wanted to call tools"
                    )
                )

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

    def _finish(self, spec: AgentSpec, response: ModelResponse) -> None:
        if not spec.structured_output:
            self._output = response.message.content or ""
            return
        if response.output_error is not None:
            raise RunFailed.of(
                ChamviValidationError(
                    f"the final answer does not match the output schema: {response.output_error[:500]}",
                    issues=response.output_issues or (),
                )
            )
        self._output = response.output

    async def _call_model(self, spec: AgentSpec, step: int) -> ModelResponse:
        delta = self._messages[self._sent_count :]
        started = workflow.now()
        response = await call_activity(
            c.ACTIVITY_CALL_MODEL,
            ModelRequest(
                run_id=workflow.info().workflow_id,
                agent=spec.name,
                step=step,
                trigger=self._trigger_without_payload(),
                base_count=self._sent_count,
                base_digest=self._sent_digest,
                delta=delta,
                skills_version=spec.skills_version,
                conversation=self._require_input().conversation,
                revision=spec.revision,
                model_settings=self._require_input().model_settings,
            ),
            ModelResponse,
            start_to_close=timedelta(seconds=spec.model_timeout_seconds),
            retry_policy=self._retry_policy(spec, None),
            summary=f"step {step}: {spec.model}",
        )
        self._sent_digest = chain_digest(self._sent_digest, delta)
        self._sent_count = len(self._messages)
        self._usage = self._usage + response.usage
        self._steps.append(
            StepView(
                index=step,
                kind="llm",
                started_at=started,
                ended_at=workflow.now(),
                text=response.message.content,
                tool_calls=response.message.tool_calls,
                usage=response.usage,
                model=spec.model,
                model_settings=response.model_settings,
            )
        )
        self._show_details()
        return response

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

    async def _wait_for_run(
        self, spec: AgentSpec, step: int, call: ToolCall, request: RunWaitRequest
    ) -> None:
        """Waits for a run the tool call started.

        A tainted one taints this run before its outcome reaches the call, and so the model.
        """
        outcome = await call_activity(
            c.ACTIVITY_WAIT_FOR_RUN,
            request,
            RunView,
            start_to_close=c.RUN_WAIT_TIMEOUT,
            heartbeat=timedelta(seconds=spec.tool_heartbeat_seconds),
            retry_policy=self._retry_policy(spec, call.name),
            summary=f"step {step}: {call.name} waits for {request.run_id}",
        )
        if outcome.taint is not None:
            self._mark_tainted(f"run:{request.run_id}")
        self._effects[request.key] = outcome.model_dump(mode="json")

    def _retry_policy(self, spec: AgentSpec, tool: str | None) -> RetryPolicy:
        policy = self._policies.get(tool)
        if policy is None:
            if tool is None:
                policy = activity_policy(spec.model_retry, DEFAULT_MODEL_RETRY, MODEL_CALL_FAILURES)
            else:
                own = next((t.retry for t in spec.tools if t.name == tool and t.retry is not None), None)
                policy = activity_policy(own or spec.tool_retry, DEFAULT_TOOL_RETRY, TOOL_CALL_FAILURES)
            self._policies[tool] = policy
        return policy

    # ---- state ----------------------------------------------------------------------------

    def _require_input(self) -> RunInput:
        assert self._input is not None
        return self._input

    def _trigger_without_payload(self) -> TriggerEnvelope:
        assert self._bare_trigger is not None
        return self._bare_trigger

    def _mark_tainted(self, source: str) -> None:
        if self._taint is None:
            self._taint = Taint(at=workflow.now(), source=source)
            workflow.upsert_search_attributes([c.SA_TAINTED.value_set(True)])

    def _set_status(self, status: RunStatus) -> None:
        previous, self._status = self._status, status
        workflow.upsert_search_attributes([c.SA_STATUS.value_set(status.value)])
        self._count_transition(previous, status)
        self._show_details()

    def _show_details(self) -> None:
        """The status and the approval's question on the run's page in the Temporal UI (no command)."""
        workflow.set_current_details(
            current_details(
                self._status,
                run_id=workflow.info().workflow_id,
                steps=len(self._steps),
                waiting=self._approvals.waiting,
                error=self._error,
            )
        )

    def _count_transition(self, previous: RunStatus | None, status: RunStatus) -> None:
        """Counts the run out of ``previous`` and into ``status`` (the SDK records nothing on replay)."""
        if previous == status:
            return
        meter = workflow.metric_meter()
        agent = self._require_input().agent
        if previous is not None:
            meter.create_counter(c.METRIC_RUNS_LEFT, "Runs that left a status.").add(
                1, {"agent": agent, "status": previous.value}
            )
        meter.create_counter(c.METRIC_RUNS_ENTERED, "Runs that entered a status.").add(
            1, {"agent": agent, "status": status.value}
        )

    def _settle(self, status: RunStatus) -> None:
        self._ended_at = workflow.now()
        # a run cancelled during an approval wait never clears the wait itself: an ended run waits
        # on nothing, so no view (`runs show`, the HTTP API) offers to answer it
        self._approvals.waiting = None
        self._set_status(status)

    def _upsert(self, *, agent: str, channel: str | None) -> None:
        self._count_transition(None, RunStatus.QUEUED)
        updates = [c.SA_AGENT.value_set(agent), c.SA_STATUS.value_set(RunStatus.QUEUED.value)]
        if channel:
            updates.append(c.SA_CHANNEL.value_set(channel))
        workflow.upsert_search_attributes(updates)
        self._show_details()
