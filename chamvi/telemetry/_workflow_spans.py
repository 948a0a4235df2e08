"""The workflow side of the ``invoke_agent`` span: its ids, and what an ``AgentRun`` reports when it ends.

A span cannot stay open in workflow code (a run outlives workers, and replays), so the run hands its
start, end and outcome to the worker once, when it ends and is not replaying, through an extern
function (the way temporalio's ``TracingInterceptor`` makes its workflow spans); the worker side
(``chamvi.telemetry._otel``) makes the span with the run's real start and end times.

Every other span of the run hangs under that span before it exists, so its ids are known from the
start: its span id is derived from the workflow id and run id, and its trace id is the caller's when
the run was started inside a span (the trace context temporalio's ``TracingInterceptor`` puts in the
start's header), else derived the same way. Any worker that replays the run after a restart derives
the same ids. :class:`AgentRunSpans` makes that context the run's own: it takes the header's place in
``workflow.info().headers``, where temporalio's workflow interceptor reads the run's context (so its
``RunWorkflow``, ``StartActivity`` and ``HandleUpdate`` spans hang under ``invoke_agent`` even for a
run started by the ``temporal`` CLI, with no header), and goes in the header of each activity the
run starts when no tracing interceptor put one there (so chamvi's ``chat`` and ``execute_tool``
spans find it on a worker without one). Without this, every activity of a run started without a
span began a trace of its own. A header is no command: histories replay as before. It imports
nothing beyond temporalio and the standard library.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter
from temporalio.worker import (
    ExecuteWorkflowInput,
    StartActivityInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowOutboundInterceptor,
)

INVOKE_AGENT_EXTERN = "__chamvi_invoke_agent_span"
TRACE_HEADER = "_tracer-data"
"""The header temporalio's ``TracingInterceptor`` carries the trace context in (a W3C carrier)."""
TRACEPARENT = "traceparent"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_SAMPLED = 0x01


@dataclass(frozen=True)
class RunSpan:
    """The ids of a run's ``invoke_agent`` span, and the caller's context it hangs under, if any."""

    trace_id: int
    span_id: int
    flags: int
    """The W3C trace flags: the caller's (its sampling decision), else sampled."""
    parent: Mapping[str, str] | None
    """The caller's W3C carrier (``traceparent``, ``tracestate``, ``baggage``); None: the run is a root."""

    def carrier(self) -> dict[str, str]:
        """The run's context as a W3C carrier: the caller's, with the run's span as the current one."""
        traceparent = f"00-{self.trace_id:032x}-{self.span_id:016x}-{self.flags:02x}"
        return {**(self.parent or {}), TRACEPARENT: traceparent}


def run_span(workflow_id: str, run_id: str, parent: Mapping[str, str] | None) -> RunSpan:
    """The ``invoke_agent`` span of run ``run_id`` of ``workflow_id``, under ``parent`` if it is valid."""
    digest = hashlib.sha256(f"{workflow_id}\n{run_id}".encode()).digest()
    span_id = int.from_bytes(digest[16:24], "big") or 1
    found = _TRACEPARENT.match(str((parent or {}).get(TRACEPARENT, "")))
    if found is None or int(found.group(1), 16) == 0 or int(found.group(2), 16) == 0:
        return RunSpan(int.from_bytes(digest[:16], "big") or 1, span_id, _SAMPLED, None)
    return RunSpan(int(found.group(1), 16), span_id, int(found.group(3), 16), dict(parent or {}))


def header_carrier(headers: Mapping[str, Payload]) -> dict[str, str] | None:
    """The W3C carrier in a workflow's or activity's ``TRACE_HEADER``, if it has one."""
    header = headers.get(TRACE_HEADER)
    # written by TracingInterceptor with the default converter, read back with it
    found = PayloadConverter.default.from_payloads([header])[0] if header is not None else None
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class RunEnded:
    """What the worker side needs for a run's ``invoke_agent`` span."""

    agent: str
    run_id: str
    start_ns: int
    end_ns: int
    span: RunSpan
    input_tokens: int
    output_tokens: int
    status: str
    error: str | None
    conversation_id: str | None = None
    """The conversation the run is a turn of, from its input (:func:`conversation_id`)."""


def conversation_id(value: object) -> str | None:
    """The id of the conversation ``value`` (a run's input, a model call's request) is a turn of.

    Conversations put it in ``RunInput.conversation.id`` (and ``ModelRequest.conversation.id``);
    read here by name, so that a run whose input has no conversation (every run before
    conversations, and any other run) has no ``gen_ai.conversation.id``: a run is not one.
    """
    found = getattr(getattr(value, "conversation", None), "id", None)
    return found if isinstance(found, str) and found else None


class AgentRunSpans(WorkflowInboundInterceptor):
    """Makes an ``AgentRun``'s span its context, and reports each that ends to the extern function."""

    span: RunSpan | None = None

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        """Puts the run's context where the run's spans and activities look for it (module docstring).

        Before any handler or the run itself starts: temporalio's interceptor reads the header the
        first time it needs it. (``workflow.info()`` does not answer yet: the outbound does.)
        """
        info = outbound.info()
        if info.workflow_type == "AgentRun":
            self.span = run_span(info.workflow_id, info.run_id, header_carrier(info.headers))
            header = PayloadConverter.default.to_payloads([self.span.carrier()])[0]
            # Info.headers is the dict of this run alone, built when the run was loaded
            cast(dict[str, Payload], info.headers)[TRACE_HEADER] = header
            outbound = _RunContextOutbound(outbound, header)
        super().init(outbound)

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        """Runs the workflow; an ``AgentRun`` that ends here is reported, whatever its outcome."""
        info, span = workflow.info(), self.span
        if span is None:
            return await super().execute_workflow(input)
        conversation = conversation_id(input.args[0]) if input.args else None
        try:
            result = await super().execute_workflow(input)
        except GeneratorExit:
            # evicted from the worker's cache (a shutdown, a full cache): the run has not ended, and
            # no workflow API answers while the coroutine is being closed
            raise
        except BaseException as error:
            if not workflow.unsafe.is_replaying():
                _report(info, span, error, conversation)
            raise
        if not workflow.unsafe.is_replaying():
            _report(info, span, None, conversation)
        return result


class _RunContextOutbound(WorkflowOutboundInterceptor):
    """Gives each activity the run's context, unless a tracing interceptor gave it its own."""

    def __init__(self, next: WorkflowOutboundInterceptor, header: Payload) -> None:
        super().__init__(next)
        self.header = header

    def _with_context(self, headers: Mapping[str, Payload]) -> Mapping[str, Payload]:
        return headers if TRACE_HEADER in headers else {**headers, TRACE_HEADER: self.header}

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        """Starts the activity with the run's context in its header."""
        input.headers = self._with_context(input.headers)
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        """Starts the local activity with the run's context in its header."""
        input.headers = self._with_context(input.headers)
        return super().start_local_activity(input)


def _report(
    info: workflow.Info, span: RunSpan, failure: BaseException | None, conversation: str | None
) -> None:
    report = workflow.extern_functions().get(INVOKE_AGENT_EXTERN)
    if report is None:
        return
    view = workflow.instance().view()
    error = None
    if view.error is not None:
        error = view.error.code
    elif failure is not None:
        error = getattr(failure, "type", None) or type(failure).__name__
    report(
        RunEnded(
            agent=view.agent,
            run_id=info.workflow_id,
            start_ns=int(info.start_time.timestamp() * 1e9),
            end_ns=workflow.time_ns(),
            span=span,
            input_tokens=view.usage.input_tokens,
            output_tokens=view.usage.output_tokens,
            status=str(view.status.value),
            error=error,
            conversation_id=conversation,
        )
    )
