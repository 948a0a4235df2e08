"""One error shape for every non-2xx answer: ``{"error": {"code": "...", "message": "..."}}``.

FastAPI's own answers (422 for a bad request, Starlette's 404/405, its 400 for a body it cannot read)
are replaced by this shape, chamvi's errors keep their codes, Temporal's RPC errors are mapped, and
anything unexpected still answers a 500 in the shape (and is logged with its traceback).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.service import RPCError, RPCStatusCode

from chamvi.errors import (
    AgentNotFoundError,
    ApprovalNotPendingError,
    ApprovalTokenExpiredError,
    ApprovalTokenInvalidError,
    ArtifactNotFoundError,
    AttachmentTooLargeError,
    ChamviError,
    ChamviValidationError,
    ChannelNotFoundError,
    ConflictError,
    InvalidAgentDefinitionError,
    InvalidDocumentError,
    InvalidInputError,
    InvalidRunStateError,
    InvalidScheduleError,
    ModelNotFoundError,
    NotFoundError,
    PermissionDeniedError,
    RunNotFoundError,
    ScheduleNotFoundError,
    StaleDeliveryError,
    UnavailableError,
    ValidationIssue,
    WebhookSignatureError,
    shown,
    validation_issues,
)
from chamvi.http.schemas import ErrorBody

log = logging.getLogger(__name__)

UNAUTHORIZED = "unauthorized"
FORBIDDEN = "forbidden"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
CONFLICT = "conflict"
VALIDATION_ERROR = "validation_error"
PAYLOAD_TOO_LARGE = "payload_too_large"
BAD_REQUEST = "bad_request"
UNAVAILABLE = "unavailable"
INTERNAL_ERROR = "internal_error"

_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")
"""The methods a route may take, for ``Allow``."""
_MAX_LISTED_ERRORS = 10
_MAX_MESSAGE_CHARS = 2000
_MAX_ISSUES = 50


_STATUS_BY_ERROR: tuple[tuple[type[ChamviError], int], ...] = (
    (NotFoundError, 404),
    (RunNotFoundError, 404),
    (AgentNotFoundError, 404),
    (ArtifactNotFoundError, 404),
    (AttachmentTooLargeError, 413),
    (ChannelNotFoundError, 404),
    (WebhookSignatureError, 401),
    (PermissionDeniedError, 403),
    (StaleDeliveryError, 409),
    (ScheduleNotFoundError, 404),
    (InvalidScheduleError, 422),
    (ConflictError, 409),
    (ApprovalNotPendingError, 409),
    (ApprovalTokenInvalidError, 403),
    (ApprovalTokenExpiredError, 410),
    (InvalidRunStateError, 409),
    # the default embedding model of managed collections does not resolve: the server's configuration
    (ModelNotFoundError, 409),
    (InvalidInputError, 422),
    (ChamviValidationError, 422),
    (InvalidDocumentError, 422),
    (InvalidAgentDefinitionError, 422),
    (UnavailableError, 503),
)

_CODE_BY_STATUS = {
    400: BAD_REQUEST,
    401: UNAUTHORIZED,
    403: FORBIDDEN,
    404: NOT_FOUND,
    405: METHOD_NOT_ALLOWED,
    409: CONFLICT,
    413: PAYLOAD_TOO_LARGE,
    422: VALIDATION_ERROR,
    503: UNAVAILABLE,
}

_RPC_STATUS: Mapping[RPCStatusCode, tuple[int, str]] = {
    RPCStatusCode.NOT_FOUND: (404, NOT_FOUND),
    RPCStatusCode.ALREADY_EXISTS: (409, CONFLICT),
    RPCStatusCode.FAILED_PRECONDITION: (409, CONFLICT),
    RPCStatusCode.UNAVAILABLE: (503, UNAVAILABLE),
    RPCStatusCode.DEADLINE_EXCEEDED: (503, UNAVAILABLE),
    RPCStatusCode.RESOURCE_EXHAUSTED: (503, UNAVAILABLE),
    RPCStatusCode.CANCELLED: (503, UNAVAILABLE),
}


class ErrorResponse(JSONResponse):
    """The error shape; renders even a message holding a lone surrogate (as an escape).

    ``issues`` (a validation error's field-by-field problems) are listed under ``error.issues``, at
    most fifty of them.
    """

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        *,
        issues: Sequence[ValidationIssue] = (),
    ) -> None:
        if len(message) > _MAX_MESSAGE_CHARS:
            message = message[: _MAX_MESSAGE_CHARS - 3] + "..."
        error: dict[str, Any] = {"code": code, "message": message}
        if issues:
            error["issues"] = [
                {"path": list(i.path), "message": i.message[:_MAX_MESSAGE_CHARS], "code": i.code}
                for i in issues[:_MAX_ISSUES]
            ]
        super().__init__({"error": error}, status_code, headers=headers)

    def render(self, content: Any) -> bytes:
        """The JSON body, with ASCII escapes when a lone surrogate makes UTF-8 encoding fail."""
        try:
            return super().render(content)
        except ValueError:  # UnicodeEncodeError: escape instead of failing the answer
            return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def status_for(error: ChamviError) -> int:
    """The HTTP status of a chamvi error: its class's, else 500 (an error no route expects)."""
    for cls, status in _STATUS_BY_ERROR:
        if isinstance(error, cls):
            return status
    return 500


def describe_validation(errors: Sequence[Any]) -> str:
    """``body.content: Field required; query.limit: ...``: every field named, at most ten listed."""
    parts: list[str] = []
    for error in errors[:_MAX_LISTED_ERRORS]:
        location = ".".join(str(part) for part in error.get("loc", ())) or "request"
        message = str(error.get("msg", "invalid"))
        if error.get("type") == "json_invalid":
            detail = (error.get("ctx") or {}).get("error")
            message = f"the body is not valid JSON ({detail})" if detail else "the body is not valid JSON"
        elif error.get("type") == "string_pattern_mismatch" and isinstance(error.get("input"), str):
            # the pattern alone does not say which value broke it: a path parameter is not echoed
            message = f"{shown(error['input'])} does not match {(error.get('ctx') or {}).get('pattern')}"
        elif message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
        parts.append(f"{location}: {message}")
    if len(errors) > _MAX_LISTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_LISTED_ERRORS} more")
    return "invalid request: " + "; ".join(parts)


def allowed_methods(request: Request) -> str:
    """The ``Allow`` header of the request's path: every method some route there takes, and OPTIONS.

    Starlette's 405 names the methods of the first route at the path only, and a path such as
    ``/agents/{name}`` has one route per method.
    """
    routes = request.app.router.routes
    # asked method by method: an included router matches as a whole, and holds no method set
    methods = [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]
    return ", ".join(sorted([*methods, "OPTIONS"]))


async def _on_http_exception(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    status = error.status_code
    code = _CODE_BY_STATUS.get(status, f"http_{status}")
    headers = error.headers
    if status == 405:
        headers = {**(headers or {}), "Allow": allowed_methods(request)}
        if request.method == "OPTIONS":
            # no route takes OPTIONS itself: the answer is the methods the path has (RFC 9110)
            return Response(status_code=204, headers=headers)
    if status == 404:
        message = f"no route {request.url.path!r}: see /openapi.json for the routes"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.url.path!r}"
    else:
        message = str(error.detail)
    if status == 400 and message == "There was an error parsing the body":
        message = "the body cannot be read as JSON (invalid, nested too deep, or a number too long)"
    return ErrorResponse(status, code, message, headers=headers)


async def _on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    errors = error.errors()
    return ErrorResponse(422, VALIDATION_ERROR, describe_validation(errors), issues=_request_issues(errors))


def _request_issues(errors: Sequence[Any]) -> tuple[ValidationIssue, ...]:
    """FastAPI's errors as issues; a body that is no JSON at all is one issue at ``body``."""
    issues = validation_issues(e for e in errors if isinstance(e, Mapping))
    return tuple(
        ValidationIssue(i.path, "the body is not valid JSON", i.code) if i.code == "json_invalid" else i
        for i in issues
    )


async def _on_chamvi_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ChamviError)
    status = status_for(error)
    if status == 500:
        log.error("%s %s: unexpected %s: %s", request.method, request.url.path, error.code, error.message)
    issues = error.issues if isinstance(error, ChamviValidationError) else ()
    headers = None
    if status == 503 and error.retry_after is not None:
        # whole seconds (RFC 9110), never 0: a client that honours it does not retry at once
        headers = {"Retry-After": str(max(1, math.ceil(error.retry_after)))}
    return ErrorResponse(status, error.code, error.message, headers, issues=issues)


async def _on_rpc_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RPCError)
    status, code = _RPC_STATUS.get(error.status, (500, INTERNAL_ERROR))
    if status >= 500:
        log.error("%s %s: Temporal answered %s: %s", request.method, request.url.path, error.status, error)
    if status == 503:
        message = f"Temporal is unavailable ({error.message}): try again shortly"
    elif status == 500:
        # every input reaching Temporal was checked first: this is chamvi's problem, not the caller's
        message = f"Temporal refused the request ({error.message}): see the API's log"
    else:
        message = error.message
    return ErrorResponse(status, code, message)


def install_error_handlers(app: FastAPI) -> None:
    """Makes HTTP, validation, chamvi and Temporal errors answer in the one error shape (``ErrorBody``)."""
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(ChamviError, _on_chamvi_error)
    app.add_exception_handler(RPCError, _on_rpc_error)


class CatchAllMiddleware:
    """The outermost layer: whatever escapes every handler still answers a 500 in the error shape.

    The error is logged once with its traceback (Starlette's own handler would re-raise it).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Passes the request on; an exception that escapes becomes a logged 500 in the error shape."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            log.exception("%s %s: unexpected error", scope.get("method"), scope.get("path"))
            if started:
                raise  # half an answer is out: only the server can cut the connection
            response = ErrorResponse(500, INTERNAL_ERROR, "unexpected error: see the API's log")
            await response(scope, receive, send)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` for these error statuses, all in the error shape."""
    descriptions = {
        400: "The body cannot be read",
        401: "Missing or unknown bearer token",
        403: "The token lacks the permission",
        404: "Not found",
        409: "Conflict with what exists",
        413: "The body is over the API's body limit",
        422: "Invalid request: the message names the fields",
        503: "Temporal is unavailable",
    }
    return {status: {"model": ErrorBody, "description": descriptions[status]} for status in statuses}
