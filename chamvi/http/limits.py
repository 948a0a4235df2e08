"""How a request's body may arrive: framed one way only, and no larger than the body limit.

A request with both ``Transfer-Encoding`` and ``Content-Length`` answers 400 and closes the
connection: a proxy in front may frame the body by the other header than the server does, and read
the rest as a request of its own (request smuggling). The server frames such a body as chunked, so
a small ``Content-Length`` would also carry a chunked body of any size past the body limit.

A body over the limit answers 413 before anything parses it. A ``Content-Length`` over the limit is
refused at once; a body without one (chunked) is counted as it arrives and refused as soon as it
passes the limit, so at most ``limit`` bytes are ever held.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chamvi.http.errors import BAD_REQUEST, PAYLOAD_TOO_LARGE, ErrorResponse

DEFAULT_BODY_LIMIT = 1_048_576


class FramingMiddleware:
    """Refuses a request framed by both ``Transfer-Encoding`` and ``Content-Length`` (RFC 9112 6.3)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answers 400 to a request framed two ways; passes every other one on."""
        if scope["type"] == "http":
            names = {name for name, _ in scope.get("headers", ())}
            if b"transfer-encoding" in names and b"content-length" in names:
                response = ErrorResponse(
                    400,
                    BAD_REQUEST,
                    "the request has both Transfer-Encoding and Content-Length: send one of them",
                    # what follows on this connection cannot be trusted to start a request
                    headers={"Connection": "close"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _too_large(limit: int) -> ErrorResponse:
    return ErrorResponse(
        413,
        PAYLOAD_TOO_LARGE,
        f"the body is over the API's limit of {limit} bytes: send less, or raise the API's body limit",
    )


class BodyLimitMiddleware:
    """Refuses a body over ``limit`` bytes with 413 before any route reads it (see the module docstring).

    Args:
        app: the ASGI app the middleware wraps.
        limit: the largest body accepted, in bytes.
        upload_limits: larger limits for ``multipart/form-data`` bodies sent to these paths (a
            dispatch with files); the route checks each file against its own limit.
        path_limits: other limits for every body sent to a path below one of these prefixes (the
            managed collections' routes, ``ManagedRoutes.max_body_bytes``).

    Raises:
        ValueError: ``limit`` is below one byte.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int = DEFAULT_BODY_LIMIT,
        upload_limits: Mapping[str, int] | None = None,
        path_limits: Mapping[str, int] | None = None,
    ) -> None:
        for value in (limit, *(upload_limits or {}).values(), *(path_limits or {}).values()):
            if value < 1:
                raise ValueError(f"body_limit must be at least 1 byte, not {value}")
        self.app = app
        self.limit = limit
        self.upload_limits = dict(upload_limits or {})
        # the longest prefix first, so a prefix inside another one's routes wins for them
        self.path_limits = sorted((path_limits or {}).items(), key=lambda item: -len(item[0]))

    def _limit_for(self, scope: Scope) -> int:
        path = scope["path"]
        if path in self.upload_limits:
            for name, value in scope.get("headers", ()):
                if name == b"content-type" and value.lower().startswith(b"multipart/form-data"):
                    return self.upload_limits[path]
        for prefix, limit in self.path_limits:
            if path == prefix or path.startswith(prefix + "/"):
                return limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Passes the request on, or answers 413 as soon as its body is known to be over the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit_for(scope)
        length = _content_length(scope)
        if length is not None:
            # the server reads no more than Content-Length (h11 enforces it), so the check is complete
            if length > limit:
                await _too_large(limit)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _too_large(limit)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
