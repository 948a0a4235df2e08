"""A conversation's turns as they start, read from its workflow's history across continue-as-new.

Like run events (``chamvi.run_events``), nothing is stored for this: the ``Conversation`` workflow's
history already records each turn's start (a child workflow, with its input), and Temporal's
long-poll of the history tells when the next one starts. A continue-as-new ends one run's history
and names the next run, which is followed in turn.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from chamvi.errors import InvalidInputError
from chamvi.models import RunInput

CONVERSATION_MESSAGE = "conversation.message"
"""The SSE event that opens each turn of a conversation's stream: the person's message."""

_CLOSED = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    }
)


@dataclass(frozen=True)
class TurnStarted:
    """A turn's run has started: its index, its run id and its input (the message and its sender)."""

    turn: int
    run_id: str
    input: RunInput


async def _decode(client: Client, payloads: Payloads) -> RunInput:
    values = await client.data_converter.decode(list(payloads.payloads), [RunInput])
    value: RunInput = values[0]
    return value


async def conversation_turns(
    client: Client, workflow_id: str, run_id: str | None
) -> AsyncGenerator[TurnStarted, None]:
    """Every turn the conversation starts, as each starts, from the start of its run ``run_id``.

    None is its current run. The turns end when the conversation's workflow ends (it was deleted).
    """
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        initiated: dict[int, RunInput] = {}
        following: str | None = None
        async for event in handle.fetch_history_events(wait_new_event=True):
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                attributes = event.start_child_workflow_execution_initiated_event_attributes
                initiated[event.event_id] = await _decode(client, attributes.input)
            elif kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                started = event.child_workflow_execution_started_event_attributes
                run_input = initiated.pop(started.initiated_event_id, None)
                if run_input is not None and run_input.conversation is not None:
                    yield TurnStarted(
                        run_input.conversation.turn, started.workflow_execution.workflow_id, run_input
                    )
            elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                following = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            elif kind in _CLOSED:
                return
        if following is None:
            return
        run_id = following


def parse_stream_id(value: str | None) -> tuple[int, int] | None:
    """A conversation stream's ``Last-Event-ID`` (``<turn>.<event id>``) as its two numbers.

    Raises:
        InvalidInputError: it is not one.
    """
    if value is None or not value.strip():
        return None
    turn, dot, event = value.strip().partition(".")
    if not dot or not turn.isdigit() or not event.isdigit():
        raise InvalidInputError(
            f"event id {value!r} is not an event id of a conversation's stream: send the `id` of the "
            "last event received (`<turn>.<event>`)"
        )
    return int(turn), int(event)
