"""A scripted HTTP server on loopback: one path, prepared answers served in order, every request
recorded. The OpenAI-compatible chat and embeddings test servers are this with their path."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Generic, Self, TypeVar


@dataclass(frozen=True)
class Hold:
    """In a stream: send nothing more and wait until the client closes the connection, then set
    ``closed`` (how a test sees that a cancelled call let go of its stream)."""

    closed: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class SseEvent:
    """In a stream: one Server-Sent Event with a name (``event: <name>``), as Anthropic sends them."""

    name: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """One prepared HTTP response.

    With ``events``, the response is a Server-Sent Events stream instead of ``body``: each dict is
    sent as ``data: <json>``, each string as ``data: <string>`` (``[DONE]``), and at each
    ``threading.Event`` the server waits until the test sets it; at a ``Hold`` it waits for the
    client to go away; then the connection closes.
    """

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    events: tuple[dict[str, Any] | str | SseEvent | threading.Event | Hold, ...] | None = None


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


def error(status: int, message: str, *, headers: dict[str, str] | None = None) -> Answer:
    """An error answer shaped like OpenAI's."""
    body = {"error": {"message": message, "type": "test_error", "param": None, "code": None}}
    return Answer(status, body, dict(headers or {}))


R = TypeVar("R", bound=Recorded)


@dataclass(frozen=True)
class Delayed:
    """An answer sent only after ``seconds``, to test client timeouts."""

    answer: Answer | Callable[[Any], Answer]
    seconds: float


class ScriptedServer(Generic[R]):
    """Start it with ``with`` (or ``start()``/``stop()``). Thread-safe.

    Args:
        path: the one path served (others answer 404).
        request_type: how a request is recorded.
        fallback: what answers once the script is exhausted; by default a 400 saying so, which fails
            a run at once instead of letting Temporal retry it for minutes.
    """

    def __init__(
        self,
        path: str,
        request_type: type[R],
        fallback: Callable[[R], Answer] | None = None,
        shape: Callable[[Answer, R], Answer] | None = None,
    ) -> None:
        self._shape = shape
        self._path = path
        self._request_type = request_type
        self._fallback = fallback
        self._lock = threading.Lock()
        self._script: list[Answer | Callable[[R], Answer] | Delayed] = []
        self._requests: list[R] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without the ``/v1``."""
        if self._httpd is None:
            raise RuntimeError(f"the {type(self).__name__} is not started: use it in a `with` block")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[R]:
        """Every request so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """How many queued answers no request has taken yet."""
        with self._lock:
            return len(self._script)

    def add(self, *answers: Answer | Callable[[R], Answer] | Delayed) -> None:
        """Queues answers, served one per request in order."""
        with self._lock:
            self._script.extend(answers)

    def _answer(self, request: R) -> tuple[Answer, float]:
        with self._lock:
            self._requests.append(request)
            scripted = self._script.pop(0) if self._script else None
            count = len(self._requests)
        delay = 0.0
        if isinstance(scripted, Delayed):
            delay, scripted = scripted.seconds, scripted.answer
        if scripted is None:
            if self._fallback is None:
                return error(400, f"the test server's script is exhausted (request {count})"), 0.0
            scripted = self._fallback
        answer = scripted if isinstance(scripted, Answer) else scripted(request)
        return (self._shape(answer, request) if self._shape else answer), delay

    def start(self) -> Self:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.monotonic()
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path != server._path:
                    self._send(error(404, f"unknown path {self.path!r}: only {server._path} is served"))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(error(400, "request body is not JSON"))
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer, delay = server._answer(server._request_type(self.path, headers, body, at))
                if delay:
                    time.sleep(delay)
                self._send(answer)

            def _stream(self, answer: Answer) -> None:
                self.close_connection = True  # the end of the body is the end of the connection
                try:
                    self.send_response(answer.status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for item in answer.events or ():
                        if isinstance(item, Hold):
                            self.wfile.flush()
                            self._until_closed(item)
                            return
                        if isinstance(item, threading.Event):
                            self.wfile.flush()
                            item.wait(timeout=120)
                            continue
                        if isinstance(item, SseEvent):
                            self.wfile.write(
                                f"event: {item.name}\ndata: {json.dumps(item.data)}\n\n".encode()
                            )
                            self.wfile.flush()
                            continue
                        data = item if isinstance(item, str) else json.dumps(item)
                        self.wfile.write(f"data: {data}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _until_closed(self, hold: Hold) -> None:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    readable, _, _ = select.select([self.connection], [], [], 0.05)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        hold.closed.set()
                        return

            def _send(self, answer: Answer) -> None:
                if answer.events is not None:
                    self._stream(answer)
                    return
                payload = json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # a short poll so that stopping the server (once per test) takes milliseconds, not half a second
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name=type(self).__name__, daemon=True
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
