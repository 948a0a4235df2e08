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
from chamvi._constants import CONVERSATION_QUEUE_MAX
from chamvi.artifacts import ArtifactStore
from chamvi.http import create_api
from chamvi.models.conversations import conversation_workflow_id
from chamvi.runtime import build_worker, local_plugin
from tests.apps.chat import make_app
from tests.integration.test_run_events import sse
from tests.polling import eventually
from tests.support.http_api import bearer, make_tokens, serving

TOKENS = make_tokens(
    person=["conversations:read", "conversations:write", "runs:read", "runs:approve"],
    reader=["conversations:read"],
    runner=["runs:read"],
    chat_only=["conversations:read:chat", "conversations:write:chat"],
)


@asynccontextmanager
async def chat_api(
    client: Client,
    task_queue: str,
    also_listed: tuple[str, ...] = (),
    *,
    queue_max: int = CONVERSATION_QUEUE_MAX,
) -> AsyncIterator[httpx.AsyncClient]:
    store = ArtifactStore.memory()
    plugin = local_plugin(make_app(), artifacts=store)
    runs = ChamviClient(client, task_queue=task_queue, artifacts=store)
    runs.conversations.queue_max = queue_max
    api = create_api(
        tokens=list(TOKENS.values()),
        managed=None,
        runs=runs,
        agents=[*plugin.app.agents, *also_listed],
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


async def test_conversation_permissions_narrowed_to_an_agent_reach_that_agents_conversations_only(
    client: Client, task_queue: str
) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue, also_listed=("billing",)) as http:
        narrow = bearer(TOKENS["chat_only"])

        async def say_hi(path: str) -> httpx.Response:
            return await http.post(path, json={"text": "hi"}, headers=narrow)

        sent = await say_hi(f"/conversations/chat/{conversation}/messages")
        assert sent.status_code == 202, sent.text
        await _answered(http, conversation, 1)
        read = await http.get(f"/conversations/chat/{conversation}", headers=narrow)
        listed = await http.get("/conversations/chat", headers=narrow)
        every_agent = await http.get("/conversations")
        its_agents = await http.get("/conversations", headers=narrow)
        elsewhere = {
            "send": await say_hi("/conversations/billing/c-1/messages"),
            "read": await http.get("/conversations/billing/c-1", headers=narrow),
            "list": await http.get("/conversations/billing", headers=narrow),
            "follow": await http.get("/conversations/billing/c-1/events", headers=narrow),
            "forget": await http.delete("/conversations/billing/c-1", headers=narrow),
            "unknown": await say_hi("/conversations/nosuch/c-1/messages"),
        }
        forgotten = await http.delete(f"/conversations/chat/{conversation}", headers=narrow)

    assert read.status_code == 200 and read.json()["messages"][0]["invoker"]["id"] == "chat_only"
    assert listed.status_code == 200 and conversation in [c["id"] for c in listed.json()["data"]]
    assert every_agent.json() == {"agents": ["billing", "chat"]}
    assert its_agents.json() == {"agents": ["chat"]}
    assert forgotten.status_code == 200, forgotten.text
    needs = {"send": "write", "read": "read", "list": "read", "follow": "read", "forget": "write"}
    for route, response in elsewhere.items():
        assert response.status_code == 403, (route, response.text)
        agent = "nosuch" if route == "unknown" else "billing"
        scope = f"conversations:{needs.get(route, 'write')}"
        assert response.json()["error"] == {
            "code": "forbidden",
            "message": f"token 'chat_only' lacks the permission '{scope}:{agent}' (or '{scope}') the "
            f"conversations of agent '{agent}' need",
        }


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



def _refused_updates(metrics: str) -> int:
    """How many update-with-start calls (a message each) the dev server refused so far, by its own count."""
    body = httpx.get(metrics).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in body.splitlines()
        if line.startswith("service_errors{")
        and 'operation="ExecuteMultiOperation"' in line
        and 'service_name="frontend"' in line
    )


async def _all_messages(http: httpx.AsyncClient, conversation: str) -> list[dict[str, Any]]:
    """Every stored message of the conversation, oldest first, page by page."""
    pages: list[list[dict[str, Any]]] = []
    before: int | None = None
    while True:
        params = {"limit": 100} if before is None else {"limit": 100, "before": before}
        page = (await http.get(f"/conversations/chat/{conversation}", params=params)).json()
        pages.insert(0, page["messages"])
        before = page["before"]
        if before is None:
            return [m for messages in pages for m in messages]


async def _waiting_approval(http: httpx.AsyncClient, run_id: str) -> str:
    async def probe() -> str | None:
        run = (await http.get(f"/runs/{run_id}")).json()
        return run["waiting"]["approval_id"] if run["status"] == "waiting" else None

    approval: str = await eventually(probe, f"run {run_id} waiting for its approval")
    return approval


@pytest.mark.timeout(600)
async def test_a_hundred_messages_posted_at_once_during_a_turn_are_all_accepted_and_answered_in_order(
    client: Client, task_queue: str, temporal_metrics: str
) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue) as http:
        path = f"/conversations/chat/{conversation}"
        await http.post(f"{path}/messages", json={"text": "m-before"})
        await _answered(http, conversation, 1)
        # Temporal forgets the conversation, its store keeps it: the workflow started again looks each
        # new message id up in the store (as any conversation past the ids it keeps in memory does),
        # so each message stays in flight at Temporal a little longer
        await client.get_workflow_handle(conversation_workflow_id("chat", conversation)).terminate()
        asking = (await http.post(f"{path}/messages", json={"text": "refund my order"})).json()
        approval = await _waiting_approval(http, asking["run_id"])
        refused_before = _refused_updates(temporal_metrics)
        texts = [f"m{i}" for i in range(100)]
        sent = await asyncio.gather(
            *(http.post(f"{path}/messages", json={"text": t, "message_id": t}) for t in texts)
        )
        refused = [(r.status_code, r.text) for r in sent if r.status_code != 202]
        assert not refused, f"{len(refused)} of 100 refused, the first: {refused[0]}"
        # nor did Temporal refuse them behind the API's back, leaving it to luck whether its retries won
        assert _refused_updates(temporal_metrics) == refused_before
        await http.post(f"/runs/{asking['run_id']}/approve", json={"approval_id": approval, "approved": True})

        async def answered() -> bool | None:
            page = (await http.get(path, params={"limit": 1})).json()
            return True if page["turns"] >= 102 else None

        await eventually(answered, "102 turns answered", seconds=480)
        messages = await _all_messages(http, conversation)

    turns = [r.json()["turn"] for r in sent]
    assert sorted(turns) == list(range(2, 102))
    users = [m for m in messages if m["role"] == "user"]
    answers = [m for m in messages if m["role"] == "assistant"]
    assert [m["turn"] for m in users] == [m["turn"] for m in answers] == list(range(102))
    text_of = dict(zip(turns, texts, strict=True))
    assert [m["text"] for m in users[2:]] == [text_of[t] for t in range(2, 102)]
    assert all(a["text"].startswith(f"re: {u['text']} | ") for u, a in zip(users, answers, strict=True))


QUEUED = ("q0", "q1", "q2")


async def test_a_message_past_the_waiting_limit_answers_503_with_retry_after_naming_the_limit(
    client: Client, task_queue: str
) -> None:
    conversation = _cid()
    async with chat_api(client, task_queue, queue_max=3) as http:
        path = f"/conversations/chat/{conversation}"
        asking = (await http.post(f"{path}/messages", json={"text": "refund my order"})).json()
        approval = await _waiting_approval(http, asking["run_id"])
        queued = [await http.post(f"{path}/messages", json={"text": t, "message_id": t}) for t in QUEUED]
        over = await http.post(f"{path}/messages", json={"text": "one too many", "message_id": "q3"})
        resent = await http.post(f"{path}/messages", json={"text": "q1", "message_id": "q1"})
        await http.post(f"/runs/{asking['run_id']}/approve", json={"approval_id": approval, "approved": True})
        await _answered(http, conversation, 4)
        again = await http.post(f"{path}/messages", json={"text": "one too many", "message_id": "q3"})
        page = await _answered(http, conversation, 5)

    assert [r.status_code for r in queued] == [202, 202, 202]
    assert over.status_code == 503, over.text
    assert over.headers["Retry-After"] == "30"
    assert over.json()["error"]["code"] == "unavailable"
    assert "already has 3 messages waiting" in over.json()["error"]["message"]
    # a resent id answers its turn, full queue or not; the refused message is taken once turns caught up
    assert resent.status_code == 200 and resent.json()["turn"] == queued[1].json()["turn"]
    assert again.status_code == 202 and again.json()["turn"] == 4
    assert page["messages"][-1]["text"] == "re: one too many | earlier: ['refund my order', 'q0', 'q1', 'q2']"
