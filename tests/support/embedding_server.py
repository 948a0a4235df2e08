"""A scripted OpenAI-compatible embeddings server on loopback, for testing ``openai/...`` embedders over HTTP.

``POST /v1/embeddings`` answers from a queue of prepared answers, in order, whatever the request; an
answer may also be a function of the request (``hashed()`` embeds the request's inputs). When the
queue is empty the server answers its ``fallback`` (by default a 400, which a knowledge pass treats
as the document's fault, so a test never waits on retries). Every request is recorded.

    with EmbeddingServer() as server:
        server.add(vectors([1, 0], [0, 1]), rate_limited("2"), error(500, "boom"))
        provider = OpenAIEmbeddingProvider(api_key="test", base_url=server.url + "/v1")

Answers and the error helpers are shared with the chat completions server (``openai_server``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from chamvi.knowledge.embedders import HashEmbedder
from tests.support.openai_server import Answer, Recorded, error, rate_limited

EMBEDDINGS_PATH = "/v1/embeddings"

__all__ = [
    "EMBEDDINGS_PATH",
    "Answer",
    "Delayed",
    "EmbeddingRequest",
    "EmbeddingServer",
    "error",
    "hashed",
    "rate_limited",
    "unused_port",
    "vectors",
]


@dataclass(frozen=True)
class EmbeddingRequest(Recorded):
    """One embeddings request as the server saw it."""

    @property
    def inputs(self) -> list[str]:
        raw = self.body.get("input", [])
        return [raw] if isinstance(raw, str) else list(raw)


Responder = Callable[[EmbeddingRequest], Answer]


@dataclass(frozen=True)
class Delayed:
    """An answer sent only after ``seconds``, to test client timeouts."""

    answer: Answer | Responder
    seconds: float


Scripted = Answer | Responder | Delayed


def _response(embeddings: Sequence[Sequence[float]], *, reverse: bool = False) -> dict[str, Any]:
    data = [
        {"object": "embedding", "index": index, "embedding": [float(x) for x in vector]}
        for index, vector in enumerate(embeddings)
    ]
    if reverse:
        data.reverse()
    return {
        "object": "list",
        "data": data,
        "model": "test-embedding-model",
        "usage": {"prompt_tokens": 3 * len(data), "total_tokens": 3 * len(data)},
    }


def vectors(*embeddings: Sequence[float], reverse: bool = False) -> Answer:
    """A 200 with these vectors (sent as given, not normalised); ``reverse`` lists them last index first."""
    return Answer(200, _response(embeddings, reverse=reverse))


def hashed(dimensions: int = 8) -> Responder:
    """Answers every request with the ``test/hash-<dimensions>`` vectors of its inputs."""
    embedder = HashEmbedder(dimensions)

    def respond(request: EmbeddingRequest) -> Answer:
        return Answer(200, _response([embedder.vector(text) for text in request.inputs]))

    return respond


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released), for connection-refused tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class EmbeddingServer:
    """The server; start it with ``with`` (or ``start()``/``stop()``). Thread-safe.

    Args:
        fallback: what answers once the script is exhausted; by default a 400 saying so.
    """

    def __init__(self, fallback: Responder | None = None) -> None:
        self._lock = threading.Lock()
        self._script: list[Scripted] = []
        self._requests: list[EmbeddingRequest] = []
        self._fallback = fallback
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without the ``/v1``."""
        if self._httpd is None:
            raise RuntimeError("the embedding test server is not started: use `with EmbeddingServer() as s:`")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[EmbeddingRequest]:
        """Every embeddings request so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """How many queued answers no request has taken yet."""
        with self._lock:
            return len(self._script)

    def add(self, *answers: Scripted) -> None:
        """Queues answers, served one per request in order."""
        with self._lock:
            self._script.extend(answers)

    def _answer(self, request: EmbeddingRequest) -> tuple[Answer, float]:
        with self._lock:
            self._requests.append(request)
            scripted: Scripted | None = self._script.pop(0) if self._script else None
            count = len(self._requests)
        delay = 0.0
        if isinstance(scripted, Delayed):
            delay = scripted.seconds
            scripted = scripted.answer
        if scripted is None:
            if self._fallback is None:
                return error(400, f"the test server's script is exhausted (request {count})"), 0.0
            scripted = self._fallback
        return (scripted if isinstance(scripted, Answer) else scripted(request)), delay

    def start(self) -> EmbeddingServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.monotonic()
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path != EMBEDDINGS_PATH:
                    self._send(error(404, f"unknown path {self.path!r}: only {EMBEDDINGS_PATH} is served"))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(error(400, "request body is not JSON"))
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer, delay = server._answer(EmbeddingRequest(self.path, headers, body, at))
                if delay:
                    time.sleep(delay)
                self._send(answer)

            def _send(self, answer: Answer) -> None:
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
            target=self._httpd.serve_forever, args=(0.02,), name="embedding-test-server", daemon=True
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

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
