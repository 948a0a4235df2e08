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

from ._calls import RunFailed, call_activity, settled
from ._model_calls import ModelCalls
from ._tool_calls import ToolCalls

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.errors import (
        BudgetExceededError,
        IncompleteResponseError,
        RunTimeoutError,
    )
    from chamvi.models import (
        AgentSpec,
        ApprovalAnswer,
        DescribeAgentRequest,
        EffectQuery,
        EffectRecord,
        ErrorInfo,
        ExtractionRequest,
        LockRequest,
        McpToolInfo,
        Message,
        RecordedEffect,
        RunInput,
        RunStatus,
        RunView,
        RunWaitRequest,
        ToolCall,
        TranscriptQuery,
        TriggerEnvelope,
    )
    from chamvi.retry import (
        AGENT_LOOKUP_FAILURES,
        non_retryable,
    )

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
class AgentRunWorkflow(ModelCalls, ToolCalls):
    """One agent run (its id is the run id): the model and tool calls, approvals, budgets and taint.

    Its queries and search attributes are how the CLI, the HTTP API and the Temporal UI see a run.
    """

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
