"""Bearer tokens: ``CHAMVI_TOKENS`` parsed once, compared in constant time, never logged.

Every route declares the permission it needs (``x-permission`` in the OpenAPI document). The
middleware authenticates before anything reads the body: a missing or unknown token answers 401, a
token without the permission 403, whatever the body holds. The token's principal is left in the
ASGI scope for the route (``principal``), which makes it the run's invoker or approver.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from re import Pattern
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, HTTPException, Request
from fastapi.routing import APIRoute
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from chamvi.errors import InvalidTokensError
from chamvi.http.errors import FORBIDDEN, UNAUTHORIZED, ErrorResponse
from chamvi.models import Invoker
from chamvi.permissions import has_narrowed_permission, has_permission

PERMISSION_KEY = "x-permission"
"""The OpenAPI extension naming the permission a route needs."""
PRINCIPAL_KEY = "chamvi.principal"
QUERY_TOKEN_KEY = "x-token-in-query"
"""Marks a route that also takes its token as ``?token=``: a browser's ``EventSource`` cannot send
headers. The access log never shows query strings (``chamvi.http.server``)."""
QUERY_TOKEN_PARAM = "token"
NARROWED_KEY = "x-permission-narrowed"
"""Marks a route that also lets in a token holding its permission narrowed by one more segment
(``artifacts:read:<agent>``); the route checks that segment itself."""
"""Where the middleware leaves the authenticated ``Token`` in the ASGI scope."""
TOKEN_KIND = "token"

AGENTS_READ = "agents:read"
"""``GET /agents`` and ``GET /agents/{name}``: the agents in code and those defined at runtime."""
AGENTS_WRITE = "agents:write"
"""``PUT /agents/{name}`` and ``DELETE /agents/{name}``: define agents made of data. A token that
holds it picks the instructions and, from the App's ``runtime_tools``, the tools of the agents it
puts: grant it as you would a deploy."""

_PERMISSION = re.compile(r"[^\s:]+(:[^\s:]+)*")
_FIELDS = ("value", "id", "permissions", "name")


@dataclass(frozen=True)
class Token:
    """A static bearer token and the principal it stands for."""

    value: str = field(repr=False)
    id: str
    permissions: tuple[str, ...] = ()
    name: str | None = None

    def invoker(self) -> Invoker:
        """The principal as a run's invoker (or approver): a snapshot of its permissions."""
        return Invoker(id=self.id, kind=TOKEN_KIND, name=self.name, permissions=list(self.permissions))


def permission(name: str, *, narrowed: bool = False) -> dict[str, Any]:
    """``openapi_extra`` for a route that needs ``name`` (or, ``narrowed``, ``name:<segment>``)."""
    return {PERMISSION_KEY: name, NARROWED_KEY: True} if narrowed else {PERMISSION_KEY: name}


def tokens_from_env(value: str | None) -> list[Token]:
    """Parses ``CHAMVI_TOKENS``: a JSON list of ``{value, id, permissions, name?}``; unset or blank is none.

    Raises:
        InvalidTokensError: naming the item and field that is wrong (never echoing a value).
    """
    if value is None or not value.strip():
        return []
    try:
        raw = json.loads(value)
    except json.JSONDecodeError as error:
        raise InvalidTokensError(
            f"CHAMVI_TOKENS is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}): "
            'use [{"value": "<secret>", "id": "feeder", "permissions": ["knowledge:read"]}]'
        ) from None
    if not isinstance(raw, list):
        raise InvalidTokensError(
            f"CHAMVI_TOKENS must be a JSON list of tokens, not {_json_type(raw)}: "
            'use [{"value": "<secret>", "id": "feeder", "permissions": ["knowledge:read"]}]'
        )
    tokens = [_token(index, item) for index, item in enumerate(raw)]
    values: dict[bytes, int] = {}
    ids: dict[str, int] = {}
    for index, token in enumerate(tokens):
        digest = _digest(token.value.encode())
        if digest in values:
            raise InvalidTokensError(
                f"CHAMVI_TOKENS[{values[digest]}] and CHAMVI_TOKENS[{index}] have the same value: "
                "give every token its own secret"
            )
        # the id is the principal runs record as invoker and approver: two tokens sharing it
        # would be one person in every run's history
        if token.id in ids:
            raise InvalidTokensError(
                f"CHAMVI_TOKENS[{ids[token.id]}] and CHAMVI_TOKENS[{index}] have the same id "
                f"{token.id!r}: give every token its own id"
            )
        values[digest] = index
        ids[token.id] = index
    return tokens


def required_tokens(value: str | None, *, needed_by: str, example: dict[str, Any]) -> list[Token]:
    """:func:`tokens_from_env`, refusing none: a server that needs tokens says so before it starts.

    ``needed_by`` says who needs them; ``example`` is a token to show in the message.

    Raises:
        InvalidTokensError: no tokens, or what :func:`tokens_from_env` refuses.
    """
    tokens = tokens_from_env(value)
    if not tokens:
        raise InvalidTokensError(
            f"CHAMVI_TOKENS is not set: {needed_by}, e.g. export CHAMVI_TOKENS='{json.dumps([example])}'"
        )
    return tokens


def _token(index: int, item: Any) -> Token:
    where = f"CHAMVI_TOKENS[{index}]"
    if not isinstance(item, dict):
        raise InvalidTokensError(
            f"{where} must be an object with value, id and permissions, not {_json_type(item)}"
        )
    unknown = sorted(repr(key) for key in item if key not in _FIELDS)
    if unknown:
        raise InvalidTokensError(
            f"{where} has unknown field(s) {', '.join(unknown)}: use value, id, permissions and name"
        )
    for name in ("value", "id"):
        if not isinstance(item.get(name), str) or not item[name].strip():
            raise InvalidTokensError(f"{where}.{name} must be a non-empty string")
    principal = item.get("name")
    if principal is not None and not isinstance(principal, str):
        raise InvalidTokensError(f"{where}.name must be a string when given")
    permissions = item.get("permissions")
    if not isinstance(permissions, list):
        raise InvalidTokensError(
            f'{where}.permissions must be a list of permissions such as ["knowledge:read", "runs:*"]'
        )
    for position, granted in enumerate(permissions):
        if not isinstance(granted, str) or not _PERMISSION.fullmatch(granted):
            shown = repr(granted) if isinstance(granted, str) else _json_type(granted)
            raise InvalidTokensError(
                f"{where}.permissions[{position}] {shown} is not a permission: use ':'-separated "
                "segments without spaces, such as 'knowledge:read', 'runs:*' or '*'"
            )
    return Token(value=item["value"], id=item["id"], permissions=tuple(permissions), name=principal)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class Authenticator:
    """Finds the token a request presents, in constant time.

    Values are compared as sha256 digests (equal lengths) with ``hmac.compare_digest``, against every
    token, without an early exit: the time taken says nothing about which token, if any, matched.
    """

    def __init__(self, tokens: Iterable[Token]) -> None:
        self._tokens = [(_digest(t.value.encode()), t) for t in tokens]

    def __len__(self) -> int:
        return len(self._tokens)

    def authenticate(self, presented: bytes) -> Token | None:
        """The token whose value is ``presented``, or None; timing says nothing of which one matched."""
        digest = _digest(presented)
        found: Token | None = None
        for expected, token in self._tokens:
            if hmac.compare_digest(expected, digest) and found is None:
                found = token
        return found


def bearer_credentials(scope: Scope) -> bytes | None:
    """The credentials of ``Authorization: Bearer <token>``, as sent; None without them."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            if scheme.lower() != b"bearer":
                return None
            credentials = credentials.strip()
            return credentials or None
    return None


def query_credentials(scope: Scope) -> bytes | None:
    """The ``token`` query parameter, as sent; None without it."""
    query: bytes = scope.get("query_string", b"")
    for name, value in parse_qsl(query.decode("latin-1")):
        if name == QUERY_TOKEN_PARAM and value.strip():
            return value.strip().encode("latin-1")
    return None


@dataclass(frozen=True)
class _Rule:
    pattern: Pattern[str]
    methods: frozenset[str]
    permission: str
    query_token: bool = False
    narrowed: bool = False


class RoutePermissions:
    """The permission each route needs, found from the request's method and path before routing."""

    def __init__(self) -> None:
        self._rules: list[_Rule] = []

    def add_router(self, router: APIRouter, prefix: str = "") -> None:
        """Adds every route of ``router``, served below ``prefix``; each must declare its permission."""
        for route in router.routes:
            if not isinstance(route, APIRoute):
                continue
            required = (route.openapi_extra or {}).get(PERMISSION_KEY)
            if not isinstance(required, str):
                raise ValueError(f"route {route.path!r} declares no permission: give it openapi_extra")
            pattern, _, _ = compile_path(prefix + route.path)
            extra = route.openapi_extra or {}
            query_token, narrowed = bool(extra.get(QUERY_TOKEN_KEY)), bool(extra.get(NARROWED_KEY))
            methods = frozenset(route.methods or ())
            self._rules.append(_Rule(pattern, methods, required, query_token, narrowed))

    def required(self, scope: Scope) -> str | None:
        """The permission the request's route needs; None when no route takes it (a 404 or 405)."""
        rule = self._rule(scope)
        return rule.permission if rule is not None else None

    def takes_narrowed(self, scope: Scope) -> bool:
        """Whether the request's route lets in its permission narrowed by one more segment."""
        rule = self._rule(scope)
        return rule is not None and rule.narrowed

    def takes_query_token(self, scope: Scope) -> bool:
        """Whether the request's route takes its token as ``?token=`` too."""
        rule = self._rule(scope)
        return rule is not None and rule.query_token

    def _rule(self, scope: Scope) -> _Rule | None:
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        # as Starlette routes: below the root path only at a segment boundary
        if root and path.startswith(root) and (path == root or path[len(root)] == "/"):
            path = path[len(root) :]
        for rule in self._rules:
            if scope["method"] in rule.methods and rule.pattern.match(path):
                return rule
        return None


class AuthMiddleware:
    """Authenticates every request to a route that declares a permission, before the route runs.

    Requests that match no route (404, 405) and public routes (the OpenAPI document and the docs)
    pass through untouched.
    """

    def __init__(self, app: ASGIApp, *, routes: RoutePermissions, tokens: Sequence[Token]) -> None:
        self.app = app
        self.routes = routes
        self.authenticator = Authenticator(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answers 401 or 403 in the error shape, or passes the request on with its token in the scope."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        required = self.routes.required(scope)
        if required is None:
            await self.app(scope, receive, send)
            return
        credentials = bearer_credentials(scope)
        if credentials is None and self.routes.takes_query_token(scope):
            credentials = query_credentials(scope)
        narrowed = self.routes.takes_narrowed(scope)
        token = await authorize(
            self.authenticator, credentials, required, scope, receive, send, narrowed=narrowed
        )
        if token is None:
            return
        scope[PRINCIPAL_KEY] = token
        await self.app(scope, receive, send)


async def authorize(
    authenticator: Authenticator,
    credentials: bytes | None,
    required: str,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    needed_by: str = "this route",
    narrowed: bool = False,
) -> Token | None:
    """The token ``credentials`` stand for when it holds ``required``; else answers 401 or 403 and None.

    ``needed_by`` names what needs the permission in the 403's message (``this route``); with
    ``narrowed``, ``required`` narrowed by one more segment lets the token in too.
    """
    token = authenticator.authenticate(credentials) if credentials is not None else None
    if token is None:
        message = (
            "unknown bearer token"
            if credentials is not None
            else "missing bearer token: send 'Authorization: Bearer <token>'"
        )
        response = ErrorResponse(401, UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
        return None
    allowed = has_permission(token.permissions, required) or (
        narrowed and has_narrowed_permission(token.permissions, required)
    )
    if not allowed:
        response = ErrorResponse(
            403, FORBIDDEN, f"token {token.id!r} lacks the permission {required!r} {needed_by} needs"
        )
        await response(scope, receive, send)
        return None
    return token


def principal(request: Request) -> Token:
    """The authenticated token of this request (a FastAPI dependency of every secured route).

    The middleware authenticated the request before routing; a request that reaches a secured route
    without a principal (a route the middleware's table missed) is refused here all the same.
    """
    token = request.scope.get(PRINCIPAL_KEY)
    if not isinstance(token, Token):
        raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    return token
