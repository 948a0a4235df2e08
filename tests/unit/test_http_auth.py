"""Tokens from CHAMVI_TOKENS, constant-time lookup, and who may call which route (in process, no server)."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from chamvi.http import InvalidTokensError, Token, create_api, tokens_from_env
from chamvi.http.auth import Authenticator, RoutePermissions, bearer_credentials
from chamvi.knowledge.embedders import EmbeddingRegistry, HashEmbedder
from chamvi.knowledge.managed import ManagedCollections
from tests.knowledge_helpers import new_store

SECRET = "s3cret-value-never-shown"


# ---- CHAMVI_TOKENS ----------------------------------------------------------------------------


def test_tokens_are_read_from_a_json_list() -> None:
    raw = json.dumps(
        [
            {"value": SECRET, "id": "feeder", "permissions": ["knowledge:read", "knowledge:write"]},
            {"value": "other", "id": "ops", "permissions": ["*"], "name": "Ops team"},
        ]
    )
    feeder, ops = tokens_from_env(raw)
    assert (feeder.value, feeder.id, feeder.permissions) == (
        SECRET,
        "feeder",
        ("knowledge:read", "knowledge:write"),
    )
    assert (ops.name, ops.invoker().model_dump()) == (
        "Ops team",
        {"id": "ops", "kind": "token", "name": "Ops team", "permissions": ["*"]},
    )


@pytest.mark.parametrize("raw", [None, "", "  \n"])
def test_no_tokens_configured_is_an_empty_list(raw: str | None) -> None:
    assert tokens_from_env(raw) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (f'[{{"value": "{SECRET}", "id": "x", ', "CHAMVI_TOKENS is not valid JSON"),
        (json.dumps({"value": SECRET}), "must be a JSON list of tokens, not an object"),
        (json.dumps(["abc"]), r"CHAMVI_TOKENS\[0\] must be an object"),
        (
            json.dumps([{"id": "x", "permissions": []}]),
            r"CHAMVI_TOKENS\[0\]\.value must be a non-empty string",
        ),
        (json.dumps([{"value": SECRET, "id": "", "permissions": []}]), r"\.id must be a non-empty string"),
        (json.dumps([{"value": SECRET, "id": "x"}]), r"\.permissions must be a list"),
        (json.dumps([{"value": SECRET, "id": "x", "permissions": "*"}]), r"\.permissions must be a list"),
        (
            json.dumps([{"value": SECRET, "id": "x", "permissions": ["knowledge read"]}]),
            r"\.permissions\[0\] 'knowledge read' is not a permission",
        ),
        (json.dumps([{"value": SECRET, "id": "x", "permissions": ["a::b"]}]), "is not a permission"),
        (json.dumps([{"value": SECRET, "id": "x", "permissions": [7]}]), r"permissions\[0\] a number"),
        (
            json.dumps([{"value": SECRET, "id": "x", "permissions": [], "scopes": []}]),
            "unknown field",
        ),
        (
            json.dumps(
                [
                    {"value": SECRET, "id": "a", "permissions": []},
                    {"value": SECRET, "id": "b", "permissions": []},
                ]
            ),
            r"CHAMVI_TOKENS\[0\] and CHAMVI_TOKENS\[1\] have the same value",
        ),
        (
            json.dumps(
                [
                    {"value": SECRET, "id": "ops", "permissions": []},
                    {"value": "other", "id": "feeder", "permissions": []},
                    {"value": "third", "id": "ops", "permissions": ["*"]},
                ]
            ),
            r"^CHAMVI_TOKENS\[0\] and CHAMVI_TOKENS\[2\] have the same id 'ops': "
            r"give every token its own id$",
        ),
    ],
)
def test_bad_tokens_are_refused_naming_the_field_never_the_secret(raw: str, message: str) -> None:
    with pytest.raises(InvalidTokensError, match=message) as refused:
        tokens_from_env(raw)
    assert SECRET not in str(refused.value) and refused.value.code == "invalid_tokens"


def test_a_token_never_shows_its_value() -> None:
    token = Token(value=SECRET, id="feeder", permissions=("knowledge:read",))
    assert SECRET not in repr(token) and SECRET not in str(token)


# ---- lookup -----------------------------------------------------------------------------------


def test_the_presented_token_is_compared_with_every_token_without_an_early_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tokens = [Token(value=f"value-{i}", id=f"t{i}") for i in range(5)]
    authenticator = Authenticator(tokens)
    compared: list[int] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(len(a))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    assert authenticator.authenticate(b"value-0") is tokens[0]
    assert authenticator.authenticate(b"value-4") is tokens[4]
    assert authenticator.authenticate(b"nope") is None
    assert authenticator.authenticate(b"value-0" + b"x" * 500) is None
    assert compared == [32] * 20  # every token each time, equal-length digests


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (b"Bearer abc", b"abc"),
        (b"bearer  abc ", b"abc"),
        (b"BEARER abc", b"abc"),
        (b"Basic abc", None),
        (b"Bearer", None),
        (b"Bearer   ", None),
        (None, None),
    ],
)
def test_only_bearer_credentials_are_read(header: bytes | None, expected: bytes | None) -> None:
    headers = [(b"authorization", header)] if header is not None else [(b"accept", b"*/*")]
    assert bearer_credentials({"headers": headers}) == expected


# ---- routes and permissions (ASGI, in process) ------------------------------------------------


async def _no_sync(name: str) -> None:
    pass


def make_api(*, base_path: str = "", tokens: list[Token] | None = None) -> FastAPI:
    embedders = EmbeddingRegistry(embedders={"test/hash-64": HashEmbedder(64)})
    managed = ManagedCollections(
        new_store(), embedders, default_model="test/hash-64", declared=[], request_sync=_no_sync
    )
    return create_api(tokens=tokens or [], managed=managed, runs=None, base_path=base_path)


GRANTS = {
    "all": ["*"],
    "knowledge": ["knowledge:*"],
    "reader": ["knowledge:read"],
    "writer": ["knowledge:write"],
    "any-read": ["*:read"],
    "too-long": ["knowledge:read:all"],
    "too-short": ["knowledge"],
    "runs": ["runs:*"],
}


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    tokens = [Token(value=f"v-{name}", id=name, permissions=tuple(p)) for name, p in GRANTS.items()]
    api = make_api(tokens=tokens)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api") as client:
        yield client


@pytest.mark.parametrize(
    ("token", "read", "write"),
    [
        ("all", 200, 201),
        ("knowledge", 200, 201),
        ("reader", 200, 403),
        ("writer", 403, 201),
        ("any-read", 200, 403),
        ("too-long", 403, 403),
        ("too-short", 403, 403),
        ("runs", 403, 403),
    ],
)
async def test_permissions_follow_the_segment_rule(
    http: httpx.AsyncClient, token: str, read: int, write: int
) -> None:
    headers = {"authorization": f"Bearer v-{token}"}
    listed = await http.get("/knowledge/collections", headers=headers)
    created = await http.post("/knowledge/collections", json={"name": f"c-{token}"}, headers=headers)
    assert (listed.status_code, created.status_code) == (read, write)


async def test_401_and_403_come_before_the_body_is_read_and_in_the_error_shape(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def post(authorization: str | None) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if authorization:
            headers["authorization"] = authorization
        return await http.post("/knowledge/collections", content=b"{not json", headers=headers)

    anonymous = await post(None)
    unknown = await post("Bearer v-nope")
    reader = await post("Bearer v-reader")
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "unauthorized"
    assert unknown.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    assert reader.status_code == 403 and reader.json() == {
        "error": {
            "code": "forbidden",
            "message": "token 'reader' lacks the permission 'knowledge:write' this route needs",
        }
    }
    assert "v-reader" not in caplog.text and "v-nope" not in caplog.text


async def test_routes_openapi_and_docs_live_below_the_base_path() -> None:
    api = make_api(base_path="/api", tokens=[Token(value="v", id="all", permissions=("*",))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api") as http:
        served = await http.get("/api/knowledge/collections", headers={"authorization": "Bearer v"})
        outside = await http.get("/knowledge/collections", headers={"authorization": "Bearer v"})
        spec = await http.get("/api/openapi.json")
        docs = await http.get("/api/docs")
    assert served.status_code == 200 and outside.status_code == 404
    assert spec.status_code == 200 and docs.status_code == 200
    assert "/api/knowledge/collections/{name}/documents/{document_id}" in spec.json()["paths"]


def test_the_openapi_document_names_each_routes_permission_and_documents_every_error() -> None:
    spec = make_api().openapi()
    operations = [op for path in spec["paths"].values() for op in path.values()]
    assert {op["x-permission"] for op in operations} == {"knowledge:read", "knowledge:write"}
    for op in operations:
        assert op["security"] == [{"HTTPBearer": []}]
        errors = {code: r for code, r in op["responses"].items() if code.startswith(("4", "5"))}
        assert {"401", "403"} <= set(errors), op["operationId"]
        for response in errors.values():
            assert response["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"
            }
    assert "HTTPValidationError" not in spec["components"]["schemas"]


@pytest.mark.parametrize("base_path", ["api", "/api/", "//api"])
def test_a_bad_base_path_is_refused(base_path: str) -> None:
    with pytest.raises(ValueError, match="base_path"):
        make_api(base_path=base_path)


def test_a_body_limit_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError, match="body_limit"):
        create_api(tokens=[], managed=None, runs=None, body_limit=0)


async def test_a_route_the_middleware_missed_still_refuses_a_request_without_a_token() -> None:
    api = make_api(tokens=[Token(value="v", id="all", permissions=("*",))])
    table = next(m.kwargs["routes"] for m in api.user_middleware if "routes" in m.kwargs)
    assert isinstance(table, RoutePermissions)
    table._rules.clear()  # as if a route were missing from the middleware's table
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api") as http:
        response = await http.get("/knowledge/collections", headers={"authorization": "Bearer v"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
