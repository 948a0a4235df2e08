"""An OTLP/HTTP receiver for tests: what a collector would get, kept in memory."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1 that keeps what arrives: (path, headers, body) per request."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self, path: str) -> list[bytes]:
        return [body for got, _, body in list(self.received) if got == path]

    def headers(self, path: str) -> list[dict[str, str]]:
        return [headers for got, headers, _ in list(self.received) if got == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
