"""``/conversations`` over real HTTP: send, resend, read, list, follow across turns, forget, permissions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from chamvi import ChamviClient
from chamvi.artifacts import ArtifactStore
from chamvi.http import create_api
from chamvi.runtime import build_worker, local_plugin
from tests.apps.chat import make_app
from tests.integration.test_run_events import sse
from tests.polling import eventually
from tests.support.http_api import bearer, make_tokens, serving

TOKENS = make_tokens(
    person=["conversations:read", "conversations:write", "runs:read", "runs:approve"],
    reader=["conversations:read"],
    runner=["runs:read"],
)


@asynccontextmanager
async def chat_api(client: Client, task_queue: str) -> AsyncIterator[httpx.AsyncClient]:
    store = ArtifactStore.memory()
    plugin = local_plugin(make_app(), artifacts=store)
    api = create_api(
        tokens=list(TOKENS.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue, artifacts=store),
        agents=list(plugin.app.agents),
        events=plugin.runtime.events,
    )
    async with (
        build_worker(client, plugin, task_queue=task_queue),
        serving(api) as url,
        httpx.AsyncClient(base_url=url, headers=bearer(TOKENS["person"]), timeout=30) as http,
    ):
        yield http


def _cid() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


async def _answered(http: httpx.AsyncClient, conversation: str, turns: int) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        page = (await http.get(f"/conversations/chat/{conversation}")).json()
        return page if page["turns"] >= turns else None

    return await eventually(probe, f"{turns} turns of {conversation}")


async def test_a_message_answers_202_with_its_turn_and_a_resent_id_200_with_the_same(
    client: Client, task_queue: str
) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue) as http:
        path = f"/conversations/chat/{conversation}/messages"
        sent = await http.post(path, json={"text": "Can I get a refund?", "message_id": "m-1"})
        again = await http.post(path, json={"text": "Can I get a refund?", "message_id": "m-1"})
        page = await _answered(http, conversation, 1)
        follow = await http.post(path, json={"text": "and how long does that take?"})
        page = await _answered(http, conversation, 2)
        listed = (await http.get("/conversations/chat")).json()

    assert sent.status_code == 202, sent.text
    assert again.status_code == 200 and again.json() == {**sent.json(), "created": False}
    assert sent.json()["turn"] == 0 and follow.json()["turn"] == 1
    assert [(m["role"], m["text"]) for m in page["messages"]] == [
        ("user", "Can I get a refund?"),
        ("assistant", "re: Can I get a refund? | earlier: []"),
        ("user", "and how long does that take?"),
        ("assistant", "re: and how long does that take? | earlier: ['Can I get a refund?']"),
    ]
    assert {m["invoker"]["id"] for m in page["messages"] if m["role"] == "user"} == {"person"}
    assert conversation in [c["id"] for c in listed["data"]]


async def test_the_conversation_routes_need_their_permissions(client: Client, task_queue: str) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue) as http:
        reader = bearer(TOKENS["reader"])
        runner = bearer(TOKENS["runner"])
        refused = await http.post(
            f"/conversations/chat/{conversation}/messages", json={"text": "hi"}, headers=reader
        )
        unread = await http.get(f"/conversations/chat/{conversation}", headers=runner)
        missing = await http.get(f"/conversations/chat/{conversation}", headers=reader)
        unknown = await http.post("/conversations/nosuch/c-1/messages", json={"text": "hi"})
        empty = await http.post(f"/conversations/chat/{conversation}/messages", json={"text": ""})

    assert refused.status_code == 403 and "conversations:write" in refused.text
    assert unread.status_code == 403 and "conversations:read" in unread.text
    assert missing.status_code == 404
    assert unknown.status_code == 404 and "unknown agent 'nosuch'" in unknown.text
    assert empty.status_code == 422


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for message in sse(response):
        yield {"id": message.id, **message.data}


async def _read_until(events: AsyncIterator[dict[str, Any]], stop: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async for event in events:
        seen.append(event)
        if stop(event):
            break
    return seen


async def test_the_event_stream_follows_turn_after_turn_with_the_models_deltas_and_resumes(
    client: Client, task_queue: str
) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue) as http:
        path = f"/conversations/chat/{conversation}"
        asking = (await http.post(f"{path}/messages", json={"text": "refund my order"})).json()
        async with http.stream("GET", f"{path}/events") as stream:
            assert stream.status_code == 200
            reading = _events(stream)
            waiting = await _read_until(reading, lambda e: e["type"] == "run.waiting")
            await http.post(
                f"/runs/{asking['run_id']}/approve",
                json={"approval_id": waiting[-1]["approval_id"], "approved": True},
            )
            await http.post(f"{path}/messages", json={"text": "and then?"})
            events = waiting + await _read_until(
                reading, lambda e: e["type"] == "run.completed" and e["turn"] == 1
            )
        first_end = next(e for e in events if e["type"] == "run.completed" and e["turn"] == 0)
        async with http.stream(
            "GET", f"{path}/events", headers={"Last-Event-ID": first_end["id"]}
        ) as resumed:
            again = await _read_until(_events(resumed), lambda e: e["type"] == "run.completed")

    kinds = [(e["turn"], e["type"]) for e in events if e["type"] != "run.delta"]
    assert kinds[0] == (0, "conversation.message") and events[0]["text"] == "refund my order"
    assert (1, "conversation.message") in kinds
    assert kinds.index((0, "run.completed")) < kinds.index((1, "conversation.message"))
    deltas = "".join(e["text"] for e in events if e["type"] == "run.delta" and e["turn"] == 1)
    assert deltas.strip() == "re: and then? | earlier: ['refund my order']"
    assert events[-1]["output"] == "re: and then? | earlier: ['refund my order']"
    assert all(e["id"] is None or e["id"].startswith(f"{e['turn']}.") for e in events)
    # resumed after turn 0's end: turn 1 whole, nothing of turn 0
    assert again[0]["type"] == "conversation.message" and again[0]["turn"] == 1
    assert {e["turn"] for e in again} == {1}


async def test_a_deleted_conversation_answers_404(client: Client, task_queue: str) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue) as http:
        path = f"/conversations/chat/{conversation}"
        await http.post(f"{path}/messages", json={"text": "forget me"})
        await _answered(http, conversation, 1)
        deleted = await http.delete(path)
        gone = await http.get(path)
        again = await http.delete(path)
        await asyncio.sleep(0)

    assert deleted.status_code == 200 and deleted.json()["id"] == conversation
    assert gone.status_code == 404
    assert again.status_code in (200, 404)


async def test_a_conversation_id_too_long_for_a_folder_is_refused_before_any_turn(
    client: Client, task_queue: str
) -> None:
    conversation = "é" * 200  # 200 characters, as the document allows, and 1 200 bytes as a folder name
    async with chat_api(client, task_queue) as http:
        sent = await http.post(f"/conversations/chat/{conversation}/messages", json={"text": "hi"})
        listed = await http.get("/conversations/chat")
    assert (sent.status_code, sent.json()["error"]["code"]) == (422, "invalid_input"), sent.text
    assert "at most 255 bytes" in sent.json()["error"]["message"]
    assert conversation not in {c["id"] for c in listed.json()["data"]}  # nothing was started


@pytest.mark.parametrize("last", ["x", "1", "1.x"])
async def test_a_malformed_last_event_id_is_refused(client: Client, task_queue: str, last: str) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue) as http:
        await http.post(f"/conversations/chat/{conversation}/messages", json={"text": "hi"})
        answer = await http.get(f"/conversations/chat/{conversation}/events", headers={"Last-Event-ID": last})
    assert answer.status_code == 422
