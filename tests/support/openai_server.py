"""A scripted OpenAI-compatible server on loopback, for testing the ``openai/...`` provider over real HTTP.

``POST /v1/chat/completions`` answers from a queue of prepared responses, in order, whatever the
request; every request is recorded with its body, headers and arrival time. A request with
``stream: true`` gets a prepared completion as a stream of chunks, the way OpenAI sends it; ``stream``
prepares a stream piece by piece (a pause, an error in the middle, no finish). When the queue is empty
the server answers 400, which fails a run at once instead of letting Temporal retry it for minutes.

    with OpenAIServer() as server:
        server.add(tool_call("add", {"a": 2, "b": 3}), text("5"))
        provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.support.scripted_server import Answer, Recorded, ScriptedServer, error

COMPLETIONS_PATH = "/v1/chat/completions"

__all__ = [
    "COMPLETIONS_PATH",
    "Answer",
    "OpenAIServer",
    "Recorded",
    "StreamError",
    "error",
    "rate_limited",
    "stream",
    "text",
    "tool_call",
]


def _completion(message: dict[str, Any], finish_reason: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def text(content: str, *, finish_reason: str = "stop", usage: tuple[int, int] = (12, 3)) -> Answer:
    """A final answer."""
    return Answer(200, _completion({"role": "assistant", "content": content}, finish_reason, usage))


def tool_call(
    name: str, arguments: dict[str, Any] | str, *, call_id: str = "call_1", usage: tuple[int, int] = (10, 7)
) -> Answer:
    """An answer calling one tool; ``arguments`` as a string is sent verbatim (e.g. invalid JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}],
    }
    return Answer(200, _completion(message, "tool_calls", usage))


def rate_limited(retry_after: str = "1") -> Answer:
    """A 429 with a ``retry-after`` header (seconds)."""
    return error(429, "Rate limit reached for test-model", headers={"retry-after": retry_after})


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }


def _usage_chunk(usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


@dataclass(frozen=True)
class StreamError:
    """An error event in the middle of a stream, as OpenAI sends one."""

    message: str


@dataclass(frozen=True)
class Reasoning:
    """A piece of reasoning, in the field vLLM and DeepSeek stream it in."""

    text: str


def stream(
    *pieces: str | Reasoning | threading.Event | StreamError | dict[str, Any],
    finish_reason: str | None = "stop",
    usage: tuple[int, int] | None = (12, 3),
) -> Answer:
    """A streamed answer: text pieces, reasoning, pauses until the test sets an event, an error
    (which ends the stream), tool call fragments as raw deltas; then the finish and the usage.
    ``finish_reason=None`` closes the stream without a finish (nor ``[DONE]``)."""
    events: list[dict[str, Any] | str | threading.Event] = [_chunk({"role": "assistant", "content": ""})]
    for piece in pieces:
        if isinstance(piece, str):
            events.append(_chunk({"content": piece}))
        elif isinstance(piece, Reasoning):
            events.append(_chunk({"reasoning_content": piece.text}))
        elif isinstance(piece, StreamError):
            events.append({"error": {"message": piece.message, "type": "server_error", "code": None}})
            return Answer(200, {}, events=tuple(events))
        elif isinstance(piece, dict):
            events.append(_chunk(piece))
        else:
            events.append(piece)
    if finish_reason is None:
        return Answer(200, {}, events=tuple(events))
    events.append(_chunk({}, finish_reason))
    if usage is not None:
        events.append(_usage_chunk(usage))
    events.append("[DONE]")
    return Answer(200, {}, events=tuple(events))


def _as_stream(answer: Answer, request: Recorded) -> Answer:
    """A prepared completion as the chunks OpenAI streams it in, for a request that asks to stream."""
    if not request.body.get("stream") or answer.status != 200 or answer.events is not None:
        return answer
    choice = answer.body["choices"][0]
    message = choice["message"]
    events: list[dict[str, Any] | str | threading.Event] = [_chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        events.append(_chunk({"content": message["content"]}))
    if message.get("refusal"):
        events.append(_chunk({"refusal": message["refusal"]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(_chunk({"tool_calls": [{"index": index, **call}]}))
    events.append(_chunk({}, choice["finish_reason"]))
    if (request.body.get("stream_options") or {}).get("include_usage") and answer.body.get("usage"):
        usage = answer.body["usage"]
        events.append(_usage_chunk((usage["prompt_tokens"], usage["completion_tokens"])))
    events.append("[DONE]")
    return Answer(200, {}, answer.headers, tuple(events))


class OpenAIServer(ScriptedServer[Recorded]):
    """``POST /v1/chat/completions``, answered from the script."""

    def __init__(self) -> None:
        super().__init__(COMPLETIONS_PATH, Recorded, shape=_as_stream)
