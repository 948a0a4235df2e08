"""The knowledge routes over real HTTP: uvicorn on loopback, a real worker, the session's Temporal."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from temporalio.client import Client

from chamvi import App
from chamvi._starters import request_sync
from chamvi.errors import ProviderHTTPError
from chamvi.http import DEFAULT_BODY_LIMIT, Token, create_api
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.collections import ManagedRoutes
from chamvi.knowledge.embedders import EmbeddingRegistry, HashEmbedder
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.managed import ManagedCollections
from chamvi.knowledge.search import KnowledgeSearch
from tests.knowledge_helpers import CountingEmbedder, knowledge_worker, new_store, wait_for_meta
from tests.polling import eventually
from tests.support.http_api import bearer, make_tokens, serving

MODEL = "test/http"
NEXT_MODEL = "test/http-next"


@dataclass
class RefusingEmbedder(CountingEmbedder):
    """Answers 400 for texts holding REFUSE while ``refuse`` is set (a provider refusing a long input)."""

    refuse: bool = True

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.refuse and any("REFUSE" in text for text in texts):
            raise ProviderHTTPError(400, "embedding provider answered 400: input refused")
        return await super().embed(texts)


@dataclass
class Stack:
    url: str
    app: App
    store: KnowledgeIndex
    managed: ManagedCollections
    embedder: RefusingEmbedder
    tokens: dict[str, Token]
    declared: str

    def http(self, token: str | None = "admin") -> httpx.AsyncClient:
        headers = bearer(self.tokens[token]) if token else {}
        return httpx.AsyncClient(base_url=self.url + "/knowledge", headers=headers, timeout=30)


def make_app(declared: str, embedder: CountingEmbedder, *others: CountingEmbedder) -> App:
    async def handbook() -> AsyncIterator[dict[str, str]]:
        yield {"id": "refunds", "content": "Refunds are paid within 30 days."}

    registry = EmbeddingRegistry()
    for each in (embedder, *others):
        registry.register(each.ref, each)
    return App(
        agents=[],
        embedders=registry,
        collections=[
            knowledge_collection(declared, model=embedder.ref, sources=[define_source(documents=handbook)])
        ],
    )


TOKENS = {
    "admin": ["*"],
    "feeder": ["knowledge:*"],
    "reader": ["knowledge:read"],
    "writer": ["knowledge:write"],
    "any-reader": ["*:read"],
    "too-deep": ["knowledge:*:x"],
    "runner": ["runs:*"],
}


@asynccontextmanager
async def api_stack(
    client: Client,
    task_queue: str,
    *,
    worker: bool = True,
    body_limit: int = DEFAULT_BODY_LIMIT,
    managed_routes: ManagedRoutes | None = None,
) -> AsyncIterator[Stack]:
    declared = f"handbook-{uuid.uuid4().hex[:8]}"
    embedder = RefusingEmbedder(ref=MODEL)
    app = make_app(declared, embedder, CountingEmbedder(ref=NEXT_MODEL))
    store = new_store()
    managed = ManagedCollections(
        store,
        app.embedders,
        default_model=MODEL,
        declared=app.collections,
        request_sync=lambda name: request_sync(client, task_queue, name),
    )
    tokens = make_tokens(**TOKENS)
    api = create_api(
        tokens=list(tokens.values()),
        managed=managed,
        runs=None,
        body_limit=body_limit,
        managed_routes=managed_routes,
    )
    async with AsyncExitStack() as stack:
        if worker:
            await stack.enter_async_context(knowledge_worker(client, app, store, task_queue))
            # the declared collection's first pass shares the embedder: let it end before counting calls
            await wait_for_meta(store, declared, "ready")
        url = await stack.enter_async_context(serving(api))
        yield Stack(url, app, store, managed, embedder, tokens, declared)


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    async with api_stack(client, task_queue) as running:
        yield running


@pytest.fixture
def name() -> str:
    return f"tickets-{uuid.uuid4().hex[:8]}"


def doc(name: str, document_id: str) -> str:
    return f"/collections/{name}/documents/{quote(document_id, safe='')}"


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) - {"issues"} == {"code", "message"}, body
    # a validation error lists its field-by-field problems, other errors have none
    assert "issues" not in body["error"] or body["error"]["code"] == "validation_error", body
    return response.status_code, body["error"]["code"]


async def until_document(http: httpx.AsyncClient, name: str, document_id: str, status: str) -> dict[str, Any]:
    """Waits until the document has ``status``; a ready one, until its collection is searchable too.

    A new collection's first pass marks its documents ready before it ends, and the collection is
    ``pending`` (unsearchable, never ``stale``) until it ends.
    """

    async def probe() -> dict[str, Any] | None:
        response = await http.get(doc(name, document_id))
        if response.status_code != 200 or response.json()["status"] != status:
            return None
        if status == "ready" and (await http.get(f"/collections/{name}")).json()["status"] == "pending":
            return None
        return dict(response.json())

    return await eventually(probe, f"document {document_id!r} becoming {status}")


def plain_search(store: KnowledgeIndex) -> KnowledgeSearch:
    """A search whose query embedding never waits on the test embedder's gate (same vectors)."""
    return KnowledgeSearch(store, EmbeddingRegistry(embedders={MODEL: HashEmbedder(64)}))


# ---- collections ------------------------------------------------------------------------------


async def test_collections_are_created_listed_shown_and_deleted(stack: Stack, name: str) -> None:
    async with stack.http() as http:
        created = await http.post("/collections", json={"name": name})
        again = await http.post("/collections", json={"name": name})
        declared = await http.post("/collections", json={"name": stack.declared})
        invalid = await http.post("/collections", json={"name": "Not Valid"})
        listed = await http.get("/collections")
        shown = await http.get(f"/collections/{name}")
        unknown = await http.get("/collections/no-such-thing")
        delete_declared = await http.delete(f"/collections/{stack.declared}")
        deleted = await http.delete(f"/collections/{name}")
        gone = await http.get(f"/collections/{name}")
        deleted_again = await http.delete(f"/collections/{name}")
    assert created.status_code == 201
    assert created.json() == {
        "name": name,
        "kind": "managed",
        "status": "pending",
        "model": MODEL,
        "generation": None,
        "documents": 0,
        "passages": 0,
        "last_pass": None,
        "error": None,
        "next_attempt": None,
        "trusted": False,
        "skipped": 0,
    }
    assert error_of(again) == (409, "conflict") and "already exists" in again.json()["error"]["message"]
    assert error_of(declared) == (409, "conflict") and "declared" in declared.json()["error"]["message"]
    assert error_of(invalid) == (422, "validation_error")
    assert "'Not Valid'" in invalid.json()["error"]["message"]
    assert listed.status_code == 200
    kinds = {c["name"]: (c["kind"], c["status"], c["trusted"]) for c in listed.json()["data"]}
    assert kinds == {name: ("managed", "pending", False), stack.declared: ("declared", "ready", True)}
    assert shown.status_code == 200 and shown.json()["name"] == name
    assert error_of(unknown) == (404, "not_found")
    assert error_of(delete_declared) == (409, "conflict")
    assert deleted.status_code == 204 and deleted.content == b""
    assert error_of(gone) == (404, "not_found") and error_of(deleted_again) == (404, "not_found")


async def test_creating_without_a_default_model_answers_409(stack: Stack, name: str) -> None:
    stack.managed.default_model = None  # neither CHAMVI_KNOWLEDGE_MODEL nor the app's embedding_model
    async with stack.http() as http:
        response = await http.post("/collections", json={"name": name})
    assert error_of(response) == (409, "conflict")
    assert "CHAMVI_KNOWLEDGE_MODEL" in response.json()["error"]["message"]


async def test_a_sync_answers_202_and_reembeds_a_stale_collection_with_the_new_default(
    stack: Stack, name: str
) -> None:
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        await http.put(doc(name, "a"), json={"content": "first ticket"})
        await until_document(http, name, "a", "ready")
        stack.managed.default_model = NEXT_MODEL  # CHAMVI_KNOWLEDGE_MODEL changed
        stale = (await http.get(f"/collections/{name}")).json()
        synced = await http.post(f"/collections/{name}/sync")
        unknown = await http.post("/collections/no-such-thing/sync")

        async def reembedded() -> dict[str, Any] | None:
            shown = (await http.get(f"/collections/{name}")).json()
            return dict(shown) if shown["model"] == NEXT_MODEL and shown["status"] == "ready" else None

        shown = await eventually(reembedded, f"collection {name!r} re-embedded with {NEXT_MODEL}")
    assert (stale["status"], stale["model"]) == ("stale", MODEL)
    assert synced.status_code == 202 and synced.json()["name"] == name
    assert error_of(unknown) == (404, "not_found")
    assert (shown["model"], shown["status"], shown["generation"], shown["documents"]) == (
        NEXT_MODEL,
        "ready",
        2,
        1,
    )


# ---- documents --------------------------------------------------------------------------------


async def test_a_put_is_accepted_with_202_and_the_same_content_again_answers_200_without_embedding(
    stack: Stack, name: str
) -> None:
    body = {
        "content": "Exports over 10 000 rows time out.",
        "title": "Export timeout",
        "source": "https://tracker.example.com/T-1042",
        "metadata": {"priority": 2, "tags": ["export"]},
    }
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        accepted = await http.put(doc(name, "T-1042"), json=body)
        ready = await until_document(http, name, "T-1042", "ready")
        calls = stack.embedder.calls
        same = await http.put(doc(name, "T-1042"), json=body)
        await asyncio.sleep(0.5)  # a pass, had one been asked for, would have embedded by now
        calls_after_same = stack.embedder.calls
        changed = await http.put(doc(name, "T-1042"), json={**body, "content": "Exports now stream."})
        await until_document(http, name, "T-1042", "ready")
        to_unknown = await http.put(doc("no-such-thing", "x"), json={"content": "x"})
        to_declared = await http.put(doc(stack.declared, "x"), json={"content": "x"})
    assert accepted.status_code == 202 and accepted.json() == {"status": "pending"}
    assert ready == {
        "id": "T-1042",
        "status": "ready",
        "error": None,
        "title": "Export timeout",
        "source": "https://tracker.example.com/T-1042",
        "metadata": {"priority": 2, "tags": ["export"]},
        "updated_at": ready["updated_at"],
    }
    assert same.status_code == 200 and same.json() == {"status": "ready"}
    assert calls_after_same == calls
    assert changed.status_code == 202 and stack.embedder.calls > calls
    assert error_of(to_unknown) == (404, "not_found")
    assert error_of(to_declared) == (409, "conflict")


async def test_percent_encoded_ids_name_the_documents_they_encode(stack: Stack, name: str) -> None:
    ids = ["a/b", "with space", "q?x#y%z&+=", "ünïcödé 文書", "x" * 255, "ends/"]
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        puts = [await http.put(doc(name, i), json={"content": f"content of {i}"}) for i in ids]
        listed = (await http.get(f"/collections/{name}/documents")).json()
        shown = [(await until_document(http, name, i, "ready"))["id"] for i in ids]
        unencoded = await http.get(f"/collections/{name}/documents/a/b")
        prefix = await http.get(doc(name, "a"))
        too_long = await http.put(doc(name, "y" * 256), json={"content": "long id"})
        deleted = await http.delete(doc(name, "a/b"))
        after = await http.get(doc(name, "a/b"))
        remaining = (await http.get(f"/collections/{name}/documents")).json()
    assert [p.status_code for p in puts] == [202] * len(ids)
    assert [d["id"] for d in listed["data"]] == sorted(ids)
    assert shown == ids
    assert unencoded.status_code == 200 and unencoded.json()["id"] == "a/b"
    assert error_of(prefix) == (404, "not_found")
    assert error_of(too_long) == (422, "validation_error")
    assert "path.document_id" in too_long.json()["error"]["message"]
    assert deleted.status_code == 204 and error_of(after) == (404, "not_found")
    assert sorted(d["id"] for d in remaining["data"]) == sorted(set(ids) - {"a/b"})


async def test_ids_that_are_not_utf8_once_percent_decoded_answer_422_naming_them(
    stack: Stack, name: str
) -> None:
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        first = await http.put(f"/collections/{name}/documents/%FF%FE", json={"content": "first"})
        second = await http.put(f"/collections/{name}/documents/a/%FE%FF", json={"content": "second"})
        shown = await http.get(f"/collections/{name}/documents/%C3%28")
        deleted = await http.delete(f"/collections/{name}/documents/%FF%FE")
        # U+FFFD itself is a character like any other when it is sent as its UTF-8 bytes
        replacement = await http.put(doc(name, "\ufffd"), json={"content": "replacement character"})
        listed = (await http.get(f"/collections/{name}/documents")).json()
    for refused, sent in ((first, "%FF%FE"), (second, "a/%FE%FF"), (shown, "%C3%28"), (deleted, "%FF%FE")):
        assert error_of(refused) == (422, "invalid_input")
        assert f"document id {sent!r} is not UTF-8" in refused.json()["error"]["message"]
    assert replacement.status_code == 202
    assert [d["id"] for d in listed["data"]] == ["\ufffd"]


async def test_documents_are_listed_by_status_with_paging(stack: Stack, name: str) -> None:
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        for document_id, content in [("bad", "REFUSE me"), ("good-1", "one"), ("good-2", "two")]:
            await http.put(doc(name, document_id), json={"content": content})
        await until_document(http, name, "bad", "failed")
        await until_document(http, name, "good-2", "ready")
        await until_document(http, name, "good-1", "ready")
        failed = await http.get(f"/collections/{name}/documents", params={"filter[status]": "failed"})
        page = await http.get(
            f"/collections/{name}/documents", params={"filter[status]": "ready", "limit": 1, "offset": 1}
        )
        everything = await http.get(f"/collections/{name}/documents")
        bad_filter = await http.get(f"/collections/{name}/documents", params={"filter[status]": "lost"})
        bad_limit = await http.get(f"/collections/{name}/documents", params={"limit": 0})
        unknown = await http.get("/collections/no-such-thing/documents")
    assert failed.status_code == 200
    assert [d["id"] for d in failed.json()["data"]] == ["bad"]
    assert failed.json()["meta"] == {"total": 1, "limit": 50, "offset": 0}
    assert [d["id"] for d in page.json()["data"]] == ["good-2"]
    assert page.json()["meta"] == {"total": 2, "limit": 1, "offset": 1}
    assert everything.json()["meta"]["total"] == 3
    assert error_of(bad_filter) == (422, "validation_error")
    assert "query.filter[status]" in bad_filter.json()["error"]["message"]
    assert error_of(bad_limit) == (422, "validation_error") and "query.limit" in bad_limit.text
    assert error_of(unknown) == (404, "not_found")


async def test_a_refused_document_fails_with_the_provider_error_and_a_new_put_of_it_tries_again(
    stack: Stack, name: str
) -> None:
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        await http.put(doc(name, "long"), json={"content": "REFUSE: far too long"})
        failed = await until_document(http, name, "long", "failed")
        stack.embedder.refuse = False  # the provider would take it now
        retried = await http.put(doc(name, "long"), json={"content": "REFUSE: far too long"})
        ready = await until_document(http, name, "long", "ready")
    assert failed["error"] is not None and "400" in failed["error"] and "input refused" in failed["error"]
    assert retried.status_code == 202  # the same content, but failed: tried again
    assert ready["error"] is None


async def test_the_previous_content_answers_searches_until_the_new_content_is_embedded(
    stack: Stack, name: str
) -> None:
    search = plain_search(stack.store)
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        await http.put(doc(name, "policy"), json={"content": "refunds take thirty days"})
        await until_document(http, name, "policy", "ready")
        stack.embedder.gate = asyncio.Event()  # the next pass waits in the embedder
        replaced = await http.put(doc(name, "policy"), json={"content": "refunds take ten days"})
        await eventually(stack.embedder.embedding, "the replacing pass embedding")
        meanwhile = await search.search([name], "refunds", top_k=3)
        pending = (await http.get(doc(name, "policy"))).json()
        stack.embedder.gate.set()
        await until_document(http, name, "policy", "ready")
        after = await search.search([name], "refunds", top_k=3)
    assert replaced.status_code == 202 and pending["status"] == "pending"
    assert [m.text for m in meanwhile.matches] == ["refunds take thirty days"]
    assert [m.text for m in after.matches] == ["refunds take ten days"]


async def test_a_deleted_document_is_gone_from_the_next_search(stack: Stack, name: str) -> None:
    search = plain_search(stack.store)
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        for document_id, content in [("keep", "shipping takes a week"), ("drop", "refund policy details")]:
            await http.put(doc(name, document_id), json={"content": content})
        await until_document(http, name, "keep", "ready")
        await until_document(http, name, "drop", "ready")
        before = await search.search([name], "refund policy details", top_k=5)
        deleted = await http.delete(doc(name, "drop"))
        after = await search.search([name], "refund policy details", top_k=5)
        shown = await http.get(doc(name, "drop"))
        again = await http.delete(doc(name, "drop"))
        in_declared = await http.delete(doc(stack.declared, "refunds"))
    assert {m.document for m in before.matches} == {"keep", "drop"}
    assert deleted.status_code == 204
    assert {m.document for m in after.matches} == {"keep"}
    assert error_of(shown) == (404, "not_found") and error_of(again) == (404, "not_found")
    assert error_of(in_declared) == (409, "conflict")


async def test_a_document_accepted_just_before_the_worker_stops_is_embedded_by_the_next_worker(
    client: Client, task_queue: str, name: str
) -> None:
    async with api_stack(client, task_queue, worker=False) as stack, stack.http() as http:
        async with knowledge_worker(client, stack.app, stack.store, task_queue, graceful=timedelta(0)):
            await wait_for_meta(stack.store, stack.declared, "ready")
            stack.embedder.gate = asyncio.Event()  # never opened: the first worker dies mid-pass
            await http.post("/collections", json={"name": name})
            accepted = await http.put(doc(name, "T-7"), json={"content": "the printer is on fire"})
            await eventually(stack.embedder.embedding, "the first worker's pass embedding")
            embedding = stack.embedder.active
        assert accepted.status_code == 202 and embedding
        pending = (await http.get(doc(name, "T-7"))).json()
        successor = RefusingEmbedder(ref=MODEL)
        app = make_app(stack.declared, successor)
        async with knowledge_worker(client, app, stack.store, task_queue):
            ready = await until_document(http, name, "T-7", "ready")
            hits = await plain_search(stack.store).search([name], "printer on fire", top_k=1)
    assert pending["status"] == "pending"
    assert ready["status"] == "ready" and successor.texts >= 1
    assert hits.untrusted and [m.document for m in hits.matches] == ["T-7"]


# ---- bodies -----------------------------------------------------------------------------------


async def test_bad_json_and_bad_fields_answer_422_naming_them(stack: Stack, name: str) -> None:
    async with stack.http() as http:
        await http.post("/collections", json={"name": name})
        not_json = await http.post(
            "/collections", content=b'{"name": ', headers={"content-type": "application/json"}
        )
        no_name = await http.post("/collections", json={})
        fields = await http.put(doc(name, "a"), json={"content": 5, "colour": "red"})
        metadata = await http.put(doc(name, "a"), json={"content": "x", "metadata": [1, 2]})
        huge_int = await http.put(doc(name, "a"), json={"content": "x", "metadata": {"n": 2**70}})
        surrogate = await http.put(
            doc(name, "a"),
            content=b'{"content": "broken \\ud800 text"}',
            headers={"content-type": "application/json"},
        )
    assert error_of(not_json) == (422, "validation_error") and "not valid JSON" in not_json.text
    assert error_of(no_name) == (422, "validation_error") and "body.name: Field required" in no_name.text
    message = fields.json()["error"]["message"]
    assert (
        error_of(fields) == (422, "validation_error")
        and "body.content" in message
        and "body.colour" in message
    )
    assert error_of(metadata) == (422, "validation_error") and "body.metadata" in metadata.text
    assert error_of(huge_int) == (422, "validation_error") and "64-bit" in huge_int.text
    assert error_of(surrogate) == (422, "validation_error") and "body.content" in surrogate.text


async def test_a_body_over_the_limit_answers_413_before_anything_parses_it(
    client: Client, task_queue: str, name: str
) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"content": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    async with api_stack(client, task_queue, worker=False, body_limit=4096) as stack, stack.http() as http:
        await http.post("/collections", json={"name": name})
        declared = await http.put(doc(name, "big"), json={"content": "x" * 5000})
        chunked = await http.put(
            doc(name, "big"), content=chunks(), headers={"content-type": "application/json"}
        )
        async with httpx.AsyncClient(base_url=http.base_url) as anonymous:
            unauthenticated = await anonymous.put(doc(name, "big"), json={"content": "x" * 5000})
        fits = await http.put(doc(name, "small"), json={"content": "x" * 4000})
    assert error_of(declared) == (413, "payload_too_large") and "4096" in declared.text
    assert error_of(chunked) == (413, "payload_too_large")
    assert error_of(unauthenticated) == (401, "unauthorized")  # who asks comes first
    assert fits.status_code == 202


async def test_content_is_at_most_1048576_characters_and_the_default_body_limit_binds_first(
    client: Client, task_queue: str, name: str
) -> None:
    big_limit = 3 * 1024 * 1024
    async with api_stack(client, task_queue, worker=False, body_limit=big_limit) as big, big.http() as http:
        await http.post("/collections", json={"name": name})
        over = await http.put(doc(name, "over"), json={"content": "x" * 1_048_577})
        at_limit = await http.put(doc(name, "at"), json={"content": "x" * 1_048_576})
    async with api_stack(client, task_queue, worker=False) as default, default.http() as http:
        await http.post("/collections", json={"name": name})
        over_body = await http.put(doc(name, "at"), json={"content": "x" * 1_048_576})
    assert error_of(over) == (422, "validation_error") and "body.content" in over.text
    assert at_limit.status_code == 202
    assert error_of(over_body) == (413, "payload_too_large")


async def test_the_managed_routes_move_to_their_base_path_with_a_body_limit_of_their_own(
    client: Client, task_queue: str, name: str
) -> None:
    routes = ManagedRoutes(base_path="/kb", max_body_bytes=16_384)
    async with (
        api_stack(client, task_queue, worker=False, body_limit=4096, managed_routes=routes) as stack,
        httpx.AsyncClient(base_url=stack.url, headers=bearer(stack.tokens["admin"])) as http,
    ):
        created = await http.post("/kb/collections", json={"name": name})
        big = await http.put(f"/kb{doc(name, 'big')}", json={"content": "x" * 12_000})
        too_big = await http.put(f"/kb{doc(name, 'huge')}", json={"content": "x" * 17_000})
        moved = await http.get("/knowledge/collections")
        paths = (await http.get("/openapi.json")).json()["paths"]
        # the API's own limit still holds for every other path (the body is refused before routing)
        elsewhere = await http.post("/kbx/collections", content=b"x" * 5000)
    assert (created.status_code, big.status_code) == (201, 202)
    assert error_of(too_big) == (413, "payload_too_large") and "16384" in too_big.text
    assert moved.status_code == 404
    assert "/kb/collections/{name}/documents/{document_id}" in paths and not any(
        path.startswith("/knowledge") for path in paths
    )
    assert error_of(elsewhere) == (413, "payload_too_large") and "4096" in elsewhere.text


async def test_managed_routes_turned_off_are_not_served_and_not_documented(
    client: Client, task_queue: str
) -> None:
    off = ManagedRoutes(enabled=False)
    async with (
        api_stack(client, task_queue, worker=False, managed_routes=off) as stack,
        httpx.AsyncClient(base_url=stack.url, headers=bearer(stack.tokens["admin"])) as http,
    ):
        listed = await http.get("/knowledge/collections")
        created = await http.post("/knowledge/collections", json={"name": "tickets"})
        paths = (await http.get("/openapi.json")).json()["paths"]
    assert error_of(listed) == (404, "not_found") and error_of(created)[0] == 404
    assert not any(path.startswith("/knowledge") for path in paths)


# ---- tokens and errors ------------------------------------------------------------------------


async def test_tokens_and_permissions_decide_who_reads_and_who_writes(
    stack: Stack, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def status(token: str | None, method: str, path: str, **kwargs: Any) -> int:
        async with stack.http(token) as http:
            return (await http.request(method, path, **kwargs)).status_code

    async with stack.http() as admin:
        await admin.post("/collections", json={"name": name})
    async with stack.http(None) as anonymous:
        missing = await anonymous.get("/collections")
        unknown = await anonymous.get("/collections", headers={"authorization": "Bearer not-a-token"})
        basic = await anonymous.get(
            "/collections", headers={"authorization": f"Basic {stack.tokens['admin'].value}"}
        )
        bad_json = await anonymous.post(
            "/collections", content=b"{", headers={"content-type": "application/json"}
        )
        public = [
            (await anonymous.get(stack.url + "/openapi.json")).status_code,
            (await anonymous.get(stack.url + "/docs")).status_code,
        ]
    assert error_of(missing) == (401, "unauthorized") and missing.headers["www-authenticate"] == "Bearer"
    assert error_of(unknown) == (401, "unauthorized") and error_of(basic) == (401, "unauthorized")
    assert error_of(bad_json) == (401, "unauthorized")  # authenticated before the body is read
    assert public == [200, 200]

    put = {"json": {"content": "hello"}}
    assert await status("reader", "GET", "/collections") == 200
    assert await status("reader", "GET", doc(name, "nope")) == 404
    assert await status("reader", "PUT", doc(name, "a"), **put) == 403
    assert await status("reader", "POST", f"/collections/{name}/sync") == 403
    assert await status("writer", "GET", "/collections") == 403
    assert await status("writer", "PUT", doc(name, "a"), **put) == 202
    assert await status("feeder", "GET", f"/collections/{name}") == 200  # knowledge:*
    assert await status("feeder", "DELETE", doc(name, "a")) == 204
    assert await status("any-reader", "GET", "/collections") == 200  # *:read
    assert await status("any-reader", "DELETE", f"/collections/{name}") == 403
    assert await status("too-deep", "GET", "/collections") == 403  # segment counts must match
    assert await status("runner", "GET", "/collections") == 403
    assert await status("admin", "DELETE", f"/collections/{name}") == 204  # * grants all
    async with stack.http("reader") as reader:
        forbidden = await reader.post("/collections", json={"name": "x"})
    assert error_of(forbidden) == (403, "forbidden")
    assert "'reader'" in forbidden.text and "'knowledge:write'" in forbidden.text
    for token in stack.tokens.values():
        assert token.value not in caplog.text


async def test_unknown_routes_and_methods_answer_in_the_error_shape(stack: Stack) -> None:
    async with stack.http() as http:
        unknown = await http.get(stack.url + "/nothing/here")
        method = await http.patch("/collections")
        slash = await http.get("/collections/")
    assert error_of(unknown) == (404, "not_found")
    assert error_of(method) == (405, "method_not_allowed") and "allow" in method.headers
    assert error_of(slash) == (404, "not_found")


async def test_options_and_a_405_list_every_method_the_path_has(stack: Stack) -> None:
    # GET and DELETE are two routes at one path: Starlette's own 405 names the first one's only
    async with stack.http() as http:
        options = await http.options("/collections/tickets")
        method = await http.patch("/collections/tickets")
    assert options.status_code == 204 and options.content == b""
    assert options.headers["allow"] == "DELETE, GET, OPTIONS"
    assert error_of(method) == (405, "method_not_allowed")
    assert method.headers["allow"] == "DELETE, GET, OPTIONS"
