"""A run's events read from its Temporal history: what ``ChamviClient.events`` and the HTTP API stream.

The history already records each model answer and tool result (activity results), each status
change (the ``ChamviStatus`` search attribute upserts), each approval answer (signals and updates) and
the end, so the events are derived from it (``chamvi.run_events`` says why), never stored beside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.converter import DataConverter, decode_typed_search_attributes

from chamvi import _constants as c
from chamvi.models import (
    ApprovalAnswer,
    ApprovalRequest,
    ModelRequest,
    ModelResponse,
    RunStatus,
    RunView,
    ToolRequest,
    ToolResult,
)
from chamvi.run_events import (
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_RESUMED,
    RUN_STARTED,
    RUN_STEP,
    RUN_WAITING,
    RunEvent,
)

T = TypeVar("T")

def _time(stamp: Timestamp) -> datetime:
    return stamp.ToDatetime(tzinfo=UTC)


@dataclass
class _Pending:
    """An approval the run asked for and has not yet been answered."""

    approval_id: str
    step: int
    tool: str
    request: ApprovalRequest
    deadline: datetime | None = None
    answer: ApprovalAnswer | None = None


class HistoryReader:
    """Turns one run's history events, in order, into run events.

    It mirrors what ``AgentRunWorkflow`` does with each result, from the results alone: the step of
    a model or tool call is in the activity's input, an approval's id counts the call's waits, its
    deadline is the waiting workflow task's time plus the request's timeout (``workflow.now()``
    there), and the answer is the signal or update the run accepted.
    """

    def __init__(self, run_id: str, converter: DataConverter) -> None:
        self.run_id = run_id
        self._converter = converter
        self._scheduled: dict[int, tuple[str, Payloads]] = {}
        self._waits: dict[tuple[int, str], int] = {}
        self._pending: _Pending | None = None
        self._task_time: datetime | None = None
        self._status: str | None = None

    async def _decode(self, payloads: Payloads, kind: type[T]) -> T:
        values = await self._converter.decode(list(payloads.payloads), [kind])
        return values[0]  # type: ignore[no-any-return]

    def _event(self, event_type: str, event: HistoryEvent, **data: Any) -> RunEvent:
        return RunEvent(
            event_type, self.run_id, event.event_id, {"at": _time(event.event_time).isoformat(), **data}
        )

    async def read(self, event: HistoryEvent) -> RunEvent | None:
        """The run event ``event`` causes, if any."""
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            # as workflow.now() reads it, through a float: the deadline comes out to the microsecond
            self._task_time = datetime.fromtimestamp(event.event_time.ToNanoseconds() / 1e9, UTC)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled = event.activity_task_scheduled_event_attributes
            self._scheduled[event.event_id] = (scheduled.activity_type.name, scheduled.input)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            name, payloads = self._scheduled.pop(completed.scheduled_event_id, ("", Payloads()))
            if name == c.ACTIVITY_CALL_MODEL:
                return await self._model_step(event, payloads, completed.result)
            if name == c.ACTIVITY_CALL_TOOL:
                return await self._tool_step(event, payloads, completed.result)
        elif kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            attributes = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            status = decode_typed_search_attributes(attributes).get(c.SA_STATUS)
            if status is not None:
                return self._status_changed(event, status)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            signaled = event.workflow_execution_signaled_event_attributes
            if signaled.signal_name == c.SIGNAL_APPROVE:
                await self._answered(signaled.input, check=True)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name == c.UPDATE_ANSWER_APPROVAL:
                await self._answered(request.input.args, check=False)
        else:
            return await self._ended(event)
        return None

    async def _model_step(self, event: HistoryEvent, payloads: Payloads, result: Payloads) -> RunEvent:
        request = await self._decode(payloads, ModelRequest)
        response = await self._decode(result, ModelResponse)
        return self._event(
            RUN_STEP,
            event,
            step=request.step,
            kind="llm",
            text=response.message.content,
            tool_calls=[call.model_dump(mode="json") for call in response.message.tool_calls],
            usage=response.usage.model_dump(mode="json"),
            finish_reason=response.finish_reason,
        )

    async def _tool_step(self, event: HistoryEvent, payloads: Payloads, result: Payloads) -> RunEvent | None:
        request = await self._decode(payloads, ToolRequest)
        outcome = await self._decode(result, ToolResult)
        if outcome.status == "approval" and outcome.approval is not None:
            key = (request.step, request.call.id)
            waits = self._waits.get(key, 0)
            self._waits[key] = waits + 1
            self._pending = _Pending(
                f"{request.step}:{request.call.id}:{waits}", request.step, request.call.name, outcome.approval
            )
            return None
        if outcome.status in ("extraction", "wait"):  # the call runs again once the run has it
            return None
        return self._event(
            RUN_STEP,
            event,
            step=request.step,
            kind="tool",
            tool=request.call.name,
            tool_call_id=request.call.id,
            status=outcome.status,
            output=outcome.output,
            error=outcome.error.model_dump(mode="json") if outcome.error else None,
        )

    async def _answered(self, payloads: Payloads, *, check: bool) -> None:
        pending = self._pending
        if pending is None or pending.deadline is None or pending.answer is not None:
            return
        try:
            answer = ApprovalAnswer.model_validate(await self._decode(payloads, dict))
        except Exception:  # the run ignored it too (a malformed signal)
            return
        if not check or answer.approval_id == pending.approval_id:
            pending.answer = answer

    def _status_changed(self, event: HistoryEvent, status: str) -> RunEvent | None:
        previous, self._status = self._status, status
        if status == RunStatus.WAITING and self._pending is not None:
            pending = self._pending
            if self._task_time is not None:
                pending.deadline = self._task_time + timedelta(seconds=pending.request.timeout_seconds)
            return self._event(
                RUN_WAITING,
                event,
                step=pending.step,
                tool=pending.tool,
                approval_id=pending.approval_id,
                title=pending.request.title,
                body=pending.request.body,
                input=pending.request.input,
                deadline=pending.deadline.isoformat() if pending.deadline else None,
            )
        if status == RunStatus.RUNNING and previous == RunStatus.WAITING and self._pending is not None:
            pending, self._pending = self._pending, None
            answer = pending.answer
            return self._event(
                RUN_RESUMED,
                event,
                step=pending.step,
                tool=pending.tool,
                approval_id=pending.approval_id,
                approved=answer.approved if answer else False,
                reason=answer.reason if answer else "approval timed out",
                approver=answer.approver.model_dump(mode="json") if answer and answer.approver else None,
            )
        if status == RunStatus.RUNNING and previous in (None, RunStatus.QUEUED):
            return self._event(RUN_STARTED, event)
        return None

    async def _ended(self, event: HistoryEvent) -> RunEvent | None:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            result = event.workflow_execution_completed_event_attributes.result
            view = await self._decode(result, RunView)
            return self._event(
                RUN_COMPLETED, event, output=view.output, usage=view.usage.model_dump(mode="json")
            )
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = event.workflow_execution_failed_event_attributes.failure
            code = failure.application_failure_info.type or "failed"
            return self._event(RUN_FAILED, event, error={"code": code, "message": failure.message})
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
            return self._event(
                RUN_FAILED,
                event,
                error={"code": "timeout", "message": "the run's Temporal execution timed out"},
            )
        if kind in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        ):
            return self._event(RUN_CANCELLED, event)
        return None


async def history_events(
    client: Client, run_id: str, after: int | None = None, *, execution: str | None = None
) -> AsyncIterator[RunEvent]:
    """The events of run ``run_id`` after event id ``after``, as the run makes them, until it ends.

    ``execution`` pins the Temporal run id, so a later run reusing the id is not followed.

    New events come from Temporal's long-poll of the history (``wait_new_event``): the call returns
    as soon as the history grows, so an event reaches the caller without a polling delay, and a
    waiting run costs one open request. Earlier events are read again to rebuild the reader's state
    (the history of one run is small) and skipped.
    """
    reader = HistoryReader(run_id, client.data_converter)
    handle = client.get_workflow_handle(run_id, run_id=execution)
    async for history_event in handle.fetch_history_events(wait_new_event=True):
        event = await reader.read(history_event)
        if event is None:
            continue
        if after is None or (event.event_id or 0) > after:
            yield event
        if event.final:
            return


__all__ = ["HistoryReader", "history_events"]
