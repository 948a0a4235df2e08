"""A run's approval waits: what it waits on, the answer a person gave, and the wait itself.

Deterministic workflow code, kept apart from ``AgentRun``'s loop. The workflow's ``approve`` signal
and ``answer_approval`` update hand their input here; :meth:`ApprovalWaits.wait` records the wait
point, waits for the answer with the request's timeout (a timer) and records the wait step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError as PydanticValidationError

    from chamvi import _constants as c
    from chamvi._run_details import approval_summary
    from chamvi.errors import ApprovalNotPendingError
    from chamvi.models import (
        ApprovalAnswer,
        ApprovalDecision,
        ApprovalRequest,
        RunStatus,
        StepView,
        ToolCall,
        WaitPoint,
    )


def input_problem(error: PydanticValidationError) -> str:
    """What is wrong with a handler's input, on one line."""
    return "; ".join(
        ".".join(str(part) for part in e["loc"]) + ": " + e["msg"] if e["loc"] else e["msg"]
        for e in error.errors()
    )


class ApprovalWaits:
    """The approval a run waits on (``waiting``) and the answer given to it (``answer``)."""

    def __init__(self) -> None:
        self.waiting: WaitPoint | None = None
        self.answer: ApprovalDecision | None = None

    def signalled(self, raw: Any) -> None:
        """The ``approve`` signal's input; a malformed, stale or unknown answer is logged and ignored.

        The input arrives as plain JSON and is read here: people type it (``temporal workflow signal
        --name approve --input ...``), and a typo or a missing input must cost one log line that says
        what to send, not the SDK's traceback for an argument it could not decode.
        """
        try:
            answer = ApprovalAnswer.model_validate(raw)
        except PydanticValidationError as error:
            approval_id = self.waiting.approval_id if self.waiting is not None else "<approval id>"
            workflow.logger.warning(
                "signal %r ignored: its input is not an approval answer (%s); send %s",
                c.SIGNAL_APPROVE,
                input_problem(error),
                json.dumps({"approval_id": approval_id, "approved": True}),
            )
            return
        problem = self.problem(answer)
        if problem is not None:
            workflow.logger.warning("approval answer rejected: %s", problem)
            return
        self.answer = answer.decision()

    def validate(self, answer: ApprovalAnswer) -> None:
        """Refuses an ``answer_approval`` update that answers nothing the run waits on.

        Raises:
            ApplicationError: ``approval_not_pending``, final (the caller is shown the problem).
        """
        problem = self.problem(answer)
        if problem is not None:
            raise ApplicationError(problem, type=ApprovalNotPendingError.code, non_retryable=True)

    def problem(self, answer: ApprovalAnswer) -> str | None:
        """Why ``answer`` answers nothing the run waits on, or None when it is the awaited answer."""
        if self.waiting is None or self.answer is not None:
            return f"run is not waiting on approval {answer.approval_id!r}: nothing to answer"
        if answer.approval_id != self.waiting.approval_id:
            return (
                f"approval {answer.approval_id!r} is stale or unknown: the run waits on "
                f"{self.waiting.approval_id!r}"
            )
        return None

    async def wait(
        self,
        step: int,
        call: ToolCall,
        approval_id: str,
        request: ApprovalRequest,
        *,
        steps: list[StepView],
        set_status: Callable[[RunStatus], None],
    ) -> ApprovalDecision:
        """Waits for the answer to ``request`` (denied with ``approval timed out`` past its timeout).

        The run is ``waiting`` meanwhile; the wait is recorded in ``steps`` as a ``wait`` step.
        """
        started = workflow.now()
        timeout = timedelta(seconds=request.timeout_seconds)
        self.answer = None
        self.waiting = WaitPoint(
            approval_id=approval_id,
            title=request.title,
            body=request.body,
            tool=call.name,
            step=step,
            until=started + timeout,
            input=request.input,
        )
        set_status(RunStatus.WAITING)
        try:
            await workflow.wait_condition(
                lambda: self.answer is not None,
                timeout=timeout,
                timeout_summary=approval_summary(approval_id, request.title),
            )
            decision = self.answer or ApprovalDecision(approved=False)
        except TimeoutError:
            decision = ApprovalDecision(approved=False, reason="approval timed out")
        steps.append(
            StepView(
                index=step,
                kind="wait",
                started_at=started,
                ended_at=workflow.now(),
                tool=call.name,
                tool_call_id=call.id,
                approval_id=approval_id,
                decision=decision,
            )
        )
        self.waiting = None
        self.answer = None
        set_status(RunStatus.RUNNING)
        return decision
