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
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Answer:
    """One prepared HTTP response."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; ``at`` is ``time.monotonic()`` on arrival."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))


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


def error(status: int, message: str, *, headers: dict[str, str] | None = None) -> Answer:
    """An error answer shaped like OpenAI's."""
    body = {"error": {"message": message, "type": "test_error", "param": None, "code": None}}
    return Answer(status, body, dict(headers or {}))


def rate_limited(retry_after: str = "1") -> Answer:
    """A 429 with a ``retry-after`` header (seconds)."""
    return error(429, "Rate limit reached for test-model", headers={"retry-after": retry_after})


class OpenAIServer:
    """The server; start it with ``with`` (or ``start()``/``stop()``). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: list[Answer] = []
        self._requests: list[Recorded] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without the ``/v1``."""
        if self._httpd is None:
            raise RuntimeError("the OpenAI test server is not started: use `with OpenAIServer() as server:`")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Recorded]:
        """Every chat completion request so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    def add(self, *answers: Answer) -> None:
        """Queues answers, served one per request in order."""
        with self._lock:
            self._script.extend(answers)

    @property
    def pending(self) -> int:
        """How many queued answers no request has taken yet."""
        with self._lock:
            return len(self._script)

    def _answer(self, recorded: Recorded) -> Answer:
        with self._lock:
            self._requests.append(recorded)
            if self._script:
                return self._script.pop(0)
        return error(400, f"the test server's script is exhausted (request {len(self._requests)})")

    def start(self) -> OpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.monotonic()
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path != COMPLETIONS_PATH:
                    self._send(error(404, f"unknown path {self.path!r}: only {COMPLETIONS_PATH} is served"))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(error(400, "request body is not JSON"))
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send(server._answer(Recorded(self.path, headers, body, at)))

            def _send(self, answer: Answer) -> None:
                payload = json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
