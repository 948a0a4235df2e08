"""A scripted OpenAI-compatible server on loopback, for testing the ``openai/...`` provider over real HTTP.

``POST /v1/chat/completions`` answers from a queue of prepared responses, in order, whatever the
request; every request is recorded with its body, headers and arrival time. When the queue is empty
the server answers 400, which fails a run at once instead of letting Temporal retry it for minutes.

    with OpenAIServer() as server:
        server.add(tool_call("add", {"a": 2, "b": 3}), text("5"))
        provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.support.scripted_server import Answer, Recorded, ScriptedServer, error

COMPLETIONS_PATH = "/v1/chat/completions"

__all__ = [
    "COMPLETIONS_PATH",
    "Answer",
    "OpenAIServer",
    "Recorded",
    "error",
    "rate_limited",
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


class OpenAIServer(ScriptedServer[Recorded]):
    """``POST /v1/chat/completions``, answered from the script."""

    def __init__(self) -> None:
        super().__init__(COMPLETIONS_PATH, Recorded)
