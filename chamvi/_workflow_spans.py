"""The workflow side of the ``invoke_agent`` span: what an ``AgentRun`` reports when it ends.

A span cannot stay open in workflow code (a run outlives workers, and replays), so the run hands its
start, end and outcome to the worker once, when it ends and is not replaying, through an extern
function (the way temporalio's ``TracingInterceptor`` makes its workflow spans); the worker side
(``chamvi.telemetry``) makes the span with the run's real start and end times. Nothing here issues a
command, so histories replay as before. It imports nothing beyond temporalio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.converter import PayloadConverter
from temporalio.worker import ExecuteWorkflowInput, WorkflowInboundInterceptor

INVOKE_AGENT_EXTERN = "__chamvi_invoke_agent_span"
TRACE_HEADER = "_tracer-data"
"""The header temporalio's ``TracingInterceptor`` carries the trace context in."""


@dataclass(frozen=True)
class RunEnded:
    """What the worker side needs for a run's ``invoke_agent`` span."""

    agent: str
    run_id: str
    start_ns: int
    end_ns: int
    carrier: dict[str, str] | None
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
    """Reports each ``AgentRun`` that ends (on the worker that ends it) to the extern function."""

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        """Runs the workflow; an ``AgentRun`` that ends here is reported, whatever its outcome."""
        info = workflow.info()
        if info.workflow_type != "AgentRun":
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
                _report(info, error, conversation)
            raise
        if not workflow.unsafe.is_replaying():
            _report(info, None, conversation)
        return result


def _report(info: workflow.Info, failure: BaseException | None, conversation: str | None) -> None:
    report = workflow.extern_functions().get(INVOKE_AGENT_EXTERN)
    if report is None:
        return
    view = workflow.instance().view()
    header = info.headers.get(TRACE_HEADER)
    # written by TracingInterceptor with the default converter, read back with it
    carrier = PayloadConverter.default.from_payloads([header])[0] if header is not None else None
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
            carrier=carrier,
            input_tokens=view.usage.input_tokens,
            output_tokens=view.usage.output_tokens,
            status=str(view.status.value),
            error=error,
            conversation_id=conversation,
        )
    )
