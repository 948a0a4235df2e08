"""What an ``AgentRun`` holds and what the Temporal UI shows of it while it runs.

The run's state (transcript, steps, usage, effects, taint, the approval it waits on), and the marks a
person reads on the run's page and in its list: the ``ChamviAgent``, ``ChamviStatus``,
``ChamviChannel`` and ``ChamviTainted`` search attributes, the current details (status, step count,
the approval's question), the runs-entered/left counters, and the retry policy each activity call
(``chamvi.call_model``, ``chamvi.call_tool``, ...) is scheduled with. Deterministic workflow code:
``AgentRunWorkflow`` and its call helpers (``_model_calls``, ``_tool_calls``) build on this class.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

from ._approvals import ApprovalWaits

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi._run_details import current_details
    from chamvi._transcript import EMPTY_DIGEST
    from chamvi.models import (
        AgentSpec,
        ErrorInfo,
        ExtractionRequest,
        McpToolInfo,
        Message,
        RunInput,
        RunStatus,
        StepView,
        Taint,
        TriggerEnvelope,
        Usage,
    )
    from chamvi.retry import (
        DEFAULT_MODEL_RETRY,
        DEFAULT_TOOL_RETRY,
        MODEL_CALL_FAILURES,
        TOOL_CALL_FAILURES,
        activity_policy,
    )


class RunRecord:
    """A run's state, its search attributes and current details, and its activity retry policies."""

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
