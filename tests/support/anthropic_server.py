"""A scripted Anthropic Messages server on loopback, for testing ``anthropic/...`` over real HTTP.

``POST /v1/messages`` answers from a queue of prepared messages, in order; every request is recorded
with its body, headers and arrival time. A request with ``stream: true`` gets a prepared message as
the Server-Sent Events the API sends, each named by an ``event:`` line: ``message_start`` (the
message without content, its input usage), ``ping``, then per content block ``content_block_start``,
its deltas (``text_delta`` pieces; ``input_json_delta`` fragments of a tool call's input, the first
one empty as the API sends it) and ``content_block_stop``, then ``message_delta`` (stop reason and
output usage) and ``message_stop``. ``stream(...)`` prepares a stream event by event (an ``error``
event in the middle, a pause, no ``message_stop``). Errors are shaped as the API shapes them:
``{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}``.

    with AnthropicServer() as server:
        server.add(tool_use("add", {"a": 2, "b": 3}), text("5"))
        provider = AnthropicProvider(api_key="test", base_url=server.url)
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.support.scripted_server import Answer, Hold, Recorded, ScriptedServer, SseEvent

MESSAGES_PATH = "/v1/messages"

_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _message(content: list[dict[str, Any]], stop_reason: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def text(content: str, *, stop_reason: str = "end_turn", usage: tuple[int, int] = (12, 3)) -> Answer:
    """A final answer."""
    return Answer(200, _message([{"type": "text", "text": content}], stop_reason, usage))


def tool_use(
    name: str,
    arguments: dict[str, Any],
    *,
    call_id: str = "toolu_01",
    preamble: str | None = None,
    usage: tuple[int, int] = (10, 7),
) -> Answer:
    """An answer calling one tool, after some text when ``preamble`` is given."""
    content: list[dict[str, Any]] = [{"type": "text", "text": preamble}] if preamble else []
    content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return Answer(200, _message(content, "tool_use", usage))


def error(status: int, message: str, *, headers: dict[str, str] | None = None) -> Answer:
    """An error answer shaped like Anthropic's."""
    body = {"type": "error", "error": {"type": _STATUS_TYPES.get(status, "api_error"), "message": message}}
    return Answer(status, body, dict(headers or {}))


def _start(usage: tuple[int, int]) -> list[SseEvent]:
    message = _message([], "", (usage[0], 1)) | {"stop_reason": None}
    return [
        SseEvent("message_start", {"type": "message_start", "message": message}),
        SseEvent("ping", {"type": "ping"}),
    ]


def _block_events(index: int, block: dict[str, Any]) -> list[SseEvent]:
    if block["type"] == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        words = block["text"].split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        deltas = [{"type": "text_delta", "text": p} for p in pieces]
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = json.dumps(block["input"])
        cut = max(1, len(raw) // 2)
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ("", raw[:cut], raw[cut:])]
    return [
        SseEvent(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        ),
        *(
            SseEvent("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ),
        SseEvent("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def _end(stop_reason: str, output_tokens: int) -> list[SseEvent]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}}
    return [
        SseEvent("message_delta", {**delta, "usage": {"output_tokens": output_tokens}}),
        SseEvent("message_stop", {"type": "message_stop"}),
    ]


def events_of(message: dict[str, Any]) -> list[SseEvent]:
    """A whole message as the events the API streams it in."""
    usage = message["usage"]
    events = _start((usage["input_tokens"], usage["output_tokens"]))
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    return [*events, *_end(message["stop_reason"], usage["output_tokens"])]


def overloaded() -> SseEvent:
    """An ``error`` event, as the API sends one when it is overloaded in the middle of a stream."""
    return SseEvent(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )


def stream(
    *pieces: str | SseEvent | threading.Event | Hold,
    stop_reason: str | None = "end_turn",
    usage: tuple[int, int] = (12, 3),
) -> Answer:
    """A streamed answer of one text block: its pieces, events as they are (an ``error`` ends the
    stream), pauses; then the stop (``stop_reason=None``: the stream closes with none)."""
    events: list[SseEvent | threading.Event | Hold] = [*_start(usage)]
    opened = False
    for piece in pieces:
        if isinstance(piece, str):
            if not opened:
                start = {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
                events.append(SseEvent("content_block_start", start))
                opened = True
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            events.append(SseEvent("content_block_delta", delta))
        elif isinstance(piece, SseEvent) and piece.name == "error":
            events.append(piece)
            return Answer(200, {}, events=tuple(events))
        else:
            events.append(piece)
    if stop_reason is None:
        return Answer(200, {}, events=tuple(events))
    if opened:
        events.append(SseEvent("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.extend(_end(stop_reason, usage[1]))
    return Answer(200, {}, events=tuple(events))


def _as_stream(answer: Answer, request: Recorded) -> Answer:
    if not request.body.get("stream") or answer.status != 200 or answer.events is not None:
        return answer
    return Answer(200, {}, answer.headers, tuple(events_of(answer.body)))


class AnthropicServer(ScriptedServer[Recorded]):
    """``POST /v1/messages``, answered from the script (a 400 once it is exhausted)."""

    def __init__(self) -> None:
        super().__init__(MESSAGES_PATH, Recorded, shape=_as_stream)
