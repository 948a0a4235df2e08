"""The webhook channel over real HTTP against a real worker: signed events in, signed messages out.

Inbound events go to the API served by uvicorn on loopback; outbound messages go to a receiver served
the same way, which answers as each test tells it (500 then 200, 400). Nothing is mocked: the runs
are real runs on the session's Temporal server.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from temporalio.client import Client

from chamvi import (
    AgentTrust,
    App,
    ChamviClient,
    ChannelSubscription,
    RunStatus,
    ToolContext,
    define_agent,
    tool,
)
from chamvi._constants import WEBHOOK_DELIVERY_HEADER, WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER
from chamvi.http import create_api
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.webhooks import legacy_signature, signature, signed_headers, webhook_channel
from tests.polling import eventually, until_status
from tests.support.http_api import bearer, make_tokens, serving

SECRET = "test-secret-0123456789"
ROLES_ON_TAINTED: tuple[tuple[str, Literal["approve", "deny"]], ...] = (
    ("forwarder", "approve"),
    ("refuser", "deny"),
)


@dataclass
class Receiver:
    """A loopback HTTP receiver: records what it got and answers the statuses it is told, in order."""

    statuses: list[int] = field(default_factory=list)
    received: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)

    def app(self) -> FastAPI:
        api = FastAPI()

        @api.post("/hook")
        async def hook(request: Request) -> Response:
            status = self.statuses.pop(0) if self.statuses else 200
            self.received.append((dict(request.headers), await request.body(), status))
            return Response(status_code=status)

        return api

    def accepted(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body, status in self.received if status < 300]


@tool
async def answer_ticket(text: str, ctx: ToolContext) -> str:
    """Replies on the ticket the run came from."""
    await ctx.channels.find_one_or_fail().emit(text, title="Re: your ticket")
    return "sent"


@tool
async def forward(text: str, to: str, ctx: ToolContext) -> str:
    """Sends to another address on the source channel."""
    await ctx.channels.find_one_or_fail().emit(text, address=to)
    return f"forwarded to {to}"


@dataclass
class Stack:
    url: str
    replica_url: str
    """A second API on the same stack, as a second replica behind a balancer."""
    receiver: Receiver
    chamvi: ChamviClient
    names: dict[str, str]
    auth: dict[str, str]

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=30)


def make_app(receiver_url: str, suffix: str) -> tuple[App, dict[str, str]]:
    names = {
        "channel": f"tickets-{suffix}",
        "triage": f"triage-{suffix}",
        "audit": f"audit-{suffix}",
        "replier": f"replier-{suffix}",
        "forwarder": f"forwarder-{suffix}",
        "refuser": f"refuser-{suffix}",
        "legacy": f"legacy-{suffix}",
    }
    channel = names["channel"]
    models = ModelRegistry()
    models.register("scripted/done", ScriptedModel([reply("done")], repeat_last=True))
    models.register(
        "scripted/replier", ScriptedModel([call("answer_ticket", "c1", text="We are on it."), reply("ok")])
    )
    models.register(
        "scripted/forwarder",
        ScriptedModel([call("forward", "c1", text="FYI", to="someone-else"), reply("ok")]),
    )

    def created(kind: str) -> Any:
        return lambda event: isinstance(event.payload, dict) and event.payload.get("type") == kind

    app = App(
        agents=[
            define_agent(
                name=names["triage"],
                model="scripted/done",
                instructions="Triage.",
                channels=[ChannelSubscription(channel, id="new-tickets", filter=created("ticket.created"))],
            ),
            define_agent(
                name=names["audit"],
                model="scripted/done",
                instructions="Audit.",
                channels=[
                    ChannelSubscription(channel, id="all"),
                    ChannelSubscription(names["legacy"], id="legacy"),
                ],
            ),
            define_agent(
                name=names["replier"],
                model="scripted/replier",
                instructions="Reply.",
                tools=[answer_ticket],
                channels=[ChannelSubscription(channel, id="replies", filter=created("reply.wanted"))],
            ),
            *(
                define_agent(
                    name=names[role],
                    model="scripted/forwarder",
                    instructions="Forward.",
                    tools=[forward],
                    trust=AgentTrust(on_tainted=on_tainted),
                    channels=[ChannelSubscription(channel, id=role, filter=created(f"{role}.wanted"))],
                )
                for role, on_tainted in ROLES_ON_TAINTED
            ),
        ],
        models=models,
        channels=[
            webhook_channel(
                channel,
                secret=SECRET,
                url=receiver_url,
                body_limit=2048,
                address_of=lambda payload: f"ticket-{payload['ticket']}" if "ticket" in payload else None,
            ),
            webhook_channel(names["legacy"], secret=SECRET, legacy_signatures=True),
        ],
    )
    return app, names


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    receiver = Receiver()
    chamvi = ChamviClient(client, task_queue=task_queue)
    async with serving(receiver.app()) as receiver_url:
        app, names = make_app(f"{receiver_url}/hook", uuid.uuid4().hex[:8])
        admin = make_tokens(admin=["*"])["admin"]
        tokens = [admin]
        api = create_api(tokens=tokens, managed=None, runs=chamvi, inbound=app)
        replica = create_api(tokens=tokens, managed=None, runs=ChamviClient(client, task_queue), inbound=app)
        async with (
            build_worker(client, app, task_queue=task_queue),
            serving(api) as url,
            serving(replica) as replica_url,
        ):
            yield Stack(url, replica_url, receiver, chamvi, names, bearer(admin))


def event(kind: str, ticket: int = 7, **extra: Any) -> bytes:
    return json.dumps({"type": kind, "ticket": ticket, **extra}).encode()


async def post(stack: Stack, body: bytes, delivery: str, **headers: str) -> httpx.Response:
    signed = {**signed_headers(SECRET, body, delivery=delivery), **headers}
    async with stack.http() as http:
        return await http.post(f"/channels/{stack.names['channel']}/events", content=body, headers=signed)


async def test_a_signed_event_starts_a_run_of_every_subscribed_agent_whose_filter_accepts_it(
    stack: Stack,
) -> None:
    response = await post(stack, event("ticket.created"), "d-1")
    assert response.status_code == 202, response.text
    runs = {r["agent"]: r for r in response.json()["runs"]}
    assert set(runs) == {stack.names["triage"], stack.names["audit"]}
    assert runs[stack.names["triage"]]["subscription"] == "new-tickets"
    triage = await stack.chamvi.wait(runs[stack.names["triage"]]["run_id"])
    assert triage.status == RunStatus.COMPLETED
    assert triage.trigger.channel == stack.names["channel"] and triage.trigger.subscription == "new-tickets"
    assert triage.trigger.address == "ticket-7" and triage.trigger.payload["type"] == "ticket.created"
    # the sender is outside: the run is tainted from its start
    assert triage.taint is not None and triage.taint.source == f"channel:{stack.names['channel']}"


async def test_an_event_no_filter_accepts_starts_only_the_unfiltered_subscriptions(stack: Stack) -> None:
    response = await post(stack, event("ticket.closed"), "d-closed")
    assert response.status_code == 202
    assert [(r["agent"], r["subscription"]) for r in response.json()["runs"]] == [
        (stack.names["audit"], "all")
    ]


async def test_the_same_delivery_twice_answers_the_same_runs_and_starts_them_once(stack: Stack) -> None:
    first = await post(stack, event("ticket.created"), "d-twice")
    again = await post(stack, event("ticket.created"), "d-twice")
    assert (first.status_code, again.status_code) == (202, 200)
    assert [r["run_id"] for r in first.json()["runs"]] == [r["run_id"] for r in again.json()["runs"]]
    assert not any(r["created"] for r in again.json()["runs"])


async def test_two_api_replicas_given_one_delivery_start_one_run_per_subscription(stack: Stack) -> None:
    body = event("ticket.created")
    headers = signed_headers(SECRET, body, delivery="d-replicas")
    path = f"/channels/{stack.names['channel']}/events"
    async with stack.http() as one, httpx.AsyncClient(base_url=stack.replica_url, timeout=30) as two:
        answers = await asyncio.gather(
            one.post(path, content=body, headers=headers), two.post(path, content=body, headers=headers)
        )
    assert all(a.status_code in (200, 202) for a in answers), [a.text for a in answers]
    first, second = ([r["run_id"] for r in a.json()["runs"]] for a in answers)
    assert first == second and len(first) == 2
    created = [r["created"] for a in answers for r in a.json()["runs"]]
    assert created.count(True) == 2  # each run started by one replica, answered to both


async def test_a_wrong_or_missing_signature_answers_401(stack: Stack) -> None:
    body = event("ticket.created")
    wrong = await post(stack, body, "d-bad", **{WEBHOOK_SIGNATURE_HEADER: "sha256=" + "0" * 64})
    async with stack.http() as http:
        missing = await http.post(f"/channels/{stack.names['channel']}/events", content=body)
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "invalid_signature")
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "invalid_signature")


async def test_a_validly_signed_delivery_outside_the_window_answers_409(stack: Stack) -> None:
    body = event("ticket.created")
    old = int(time.time()) - 3600
    response = await post(
        stack,
        body,
        "d-old",
        **{
            WEBHOOK_TIMESTAMP_HEADER: str(old),
            WEBHOOK_SIGNATURE_HEADER: signature(SECRET, old, "d-old", body),
        },
    )
    assert (response.status_code, response.json()["error"]["code"]) == (409, "stale_delivery")


async def test_a_captured_delivery_sent_again_under_new_delivery_ids_starts_nothing(stack: Stack) -> None:
    body = event("ticket.created")
    captured = signed_headers(SECRET, body, delivery="d-captured")
    path = f"/channels/{stack.names['channel']}/events"
    async with stack.http() as http:
        first = await http.post(path, content=body, headers=captured)
        replays = [
            await http.post(path, content=body, headers={**captured, WEBHOOK_DELIVERY_HEADER: f"d-new-{n}"})
            for n in range(3)
        ]
    assert first.status_code == 202
    assert [(r.status_code, r.json()["error"]["code"]) for r in replays] == [(401, "invalid_signature")] * 3


async def test_a_signature_that_leaves_the_delivery_id_out_is_refused_unless_the_channel_takes_legacy_ones(
    stack: Stack,
) -> None:
    body = event("ticket.created")
    stamp = int(time.time())
    legacy = {
        WEBHOOK_TIMESTAMP_HEADER: str(stamp),
        WEBHOOK_SIGNATURE_HEADER: legacy_signature(SECRET, stamp, body),
        WEBHOOK_DELIVERY_HEADER: "d-legacy",
    }
    async with stack.http() as http:
        refused = await http.post(f"/channels/{stack.names['channel']}/events", content=body, headers=legacy)
        path = f"/channels/{stack.names['legacy']}/events"
        first = await http.post(path, content=body, headers=legacy)
        invented = {**legacy, WEBHOOK_DELIVERY_HEADER: "d-invented"}
        replayed = await http.post(path, content=body, headers=invented)
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "invalid_signature")
    assert "leaves the delivery id unsigned" in refused.json()["error"]["message"]
    # a legacy signature is its own idempotency key: the same signature answers the earlier runs
    assert (first.status_code, replayed.status_code) == (202, 200)
    assert [r["run_id"] for r in first.json()["runs"]] == [r["run_id"] for r in replayed.json()["runs"]]
    assert first.json()["delivery"] == replayed.json()["delivery"] != "d-legacy"


DEEP = b'{"type": "ticket.created", "ticket": 7, "x": ' + b"[" * 500 + b"]" * 500 + b"}"
INVALID = (422, "validation_error")
NOW = "now"


@pytest.mark.parametrize(
    ("body", "delivery", "stamp", "signed", "answer"),
    [
        (DEEP, "d-deep", NOW, True, INVALID),
        (b'{"type": "ticket.created", "ticket": 7, "x": "\\ud800"}', "d-surrogate", NOW, True, INVALID),
        (b'{"type": "ticket.created", "ticket": 7, "x": NaN}', "d-nan", NOW, True, INVALID),
        (b'{"type": "ticket.created", "ticket": "' + b"7" * 300 + b'"}', "d-address", NOW, True, INVALID),
        (event("ticket.created"), "d" * 256, NOW, True, INVALID),
        (event("ticket.created"), "d.dotted", NOW, True, INVALID),
        (b"nope", "d-not-json", NOW, True, INVALID),
        (event("ticket.created"), "d-huge-stamp", "9" * 400, True, (409, "stale_delivery")),
        (event("ticket.created"), "d-huge-bad", "9" * 400, False, (401, "invalid_signature")),
        (event("ticket.created"), "d-negative", "-5", True, (401, "invalid_signature")),
    ],
    ids=[
        "json-500-deep",
        "lone-surrogate",
        "nan",
        "address-over-255",
        "delivery-over-255",
        "delivery-with-a-dot",
        "not-json",
        "400-digit-timestamp-signed",
        "400-digit-timestamp-unsigned",
        "negative-timestamp",
    ],
)
async def test_an_edge_input_answers_as_post_runs_would_never_500(
    stack: Stack, body: bytes, delivery: str, stamp: str, signed: bool, answer: tuple[int, str]
) -> None:
    stamp = str(int(time.time())) if stamp == NOW else stamp
    sent = {
        WEBHOOK_TIMESTAMP_HEADER: stamp,
        WEBHOOK_SIGNATURE_HEADER: signature(SECRET, stamp, delivery, body) if signed else "v2=" + "0" * 64,
        WEBHOOK_DELIVERY_HEADER: delivery,
    }
    async with stack.http() as http:
        response = await http.post(f"/channels/{stack.names['channel']}/events", content=body, headers=sent)
    assert (response.status_code, response.json()["error"]["code"]) == answer, response.text


async def test_a_body_over_the_channels_limit_answers_413(stack: Stack) -> None:
    response = await post(stack, event("ticket.created", padding="x" * 4096), "d-big")
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")


async def test_an_unknown_channel_answers_404(stack: Stack) -> None:
    body = event("ticket.created")
    async with stack.http() as http:
        response = await http.post(
            "/channels/nowhere/events", content=body, headers=signed_headers(SECRET, body, delivery="d")
        )
    assert (response.status_code, response.json()["error"]["code"]) == (404, "channel_not_found")


async def test_a_reply_to_a_receiver_answering_500_then_200_is_delivered_once_with_the_same_key(
    stack: Stack,
) -> None:
    stack.receiver.statuses[:] = [500, 200]
    response = await post(stack, event("reply.wanted", ticket=42), "d-reply")
    run_id = next(r["run_id"] for r in response.json()["runs"] if r["agent"] == stack.names["replier"])
    run = await stack.chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert [status for _, _, status in stack.receiver.received] == [500, 200]
    keys = {headers["idempotency-key"] for headers, _, _ in stack.receiver.received}
    assert len(keys) == 1 and next(iter(keys)).startswith(f"{run_id}:emit:")
    # a tainted run may answer where it came from without asking anyone
    assert stack.receiver.accepted() == [
        {"address": "ticket-42", "title": "Re: your ticket", "body": "We are on it.", "key": next(iter(keys))}
    ]
    headers, body, _ = stack.receiver.received[-1]
    assert headers[WEBHOOK_DELIVERY_HEADER.lower()] == next(iter(keys))
    assert hmac.compare_digest(
        headers[WEBHOOK_SIGNATURE_HEADER.lower()],
        signature(SECRET, headers[WEBHOOK_TIMESTAMP_HEADER.lower()], next(iter(keys)), body),
    )


async def test_a_receiver_refusing_with_400_fails_the_emit_as_a_tool_error(stack: Stack) -> None:
    stack.receiver.statuses[:] = [400]
    response = await post(stack, event("reply.wanted"), "d-refused")
    run_id = next(r["run_id"] for r in response.json()["runs"] if r["agent"] == stack.names["replier"])
    run = await stack.chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED
    step = next(s for s in run.steps if s.tool == "answer_ticket")
    assert step.error is not None and step.error.code == "channel_delivery_failed"
    assert len(stack.receiver.received) == 1  # never retried


async def test_a_tainted_runs_emit_to_another_address_waits_for_approval_and_the_source_hears_of_it(
    stack: Stack,
) -> None:
    response = await post(stack, event("forwarder.wanted", ticket=9), "d-forward")
    run_id = next(r["run_id"] for r in response.json()["runs"] if r["agent"] == stack.names["forwarder"])
    waiting = await until_status(stack.chamvi, run_id, RunStatus.WAITING)
    assert waiting.waiting is not None and "untrusted" in waiting.waiting.title
    notices = stack.receiver.accepted()
    assert len(notices) == 1 and notices[0]["address"] == "ticket-9"
    assert notices[0]["title"] == f"Approval needed: tool 'forward' of agent {stack.names['forwarder']!r}"
    assert "chamvi approve" in notices[0]["body"]
    # generic: neither the text nor the address the model chose
    assert "someone-else" not in json.dumps(notices[0]) and "FYI" not in json.dumps(notices[0])
    await stack.chamvi.approvals.approve(run_id)
    run = await stack.chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED
    sent = stack.receiver.accepted()
    assert len(sent) == 2 and sent[1]["address"] == "someone-else" and sent[1]["body"] == "FYI"


async def test_a_tainted_runs_emit_to_another_address_is_denied_when_the_agent_says_deny(
    stack: Stack,
) -> None:
    response = await post(stack, event("refuser.wanted"), "d-refuse")
    run_id = next(r["run_id"] for r in response.json()["runs"] if r["agent"] == stack.names["refuser"])
    run = await stack.chamvi.wait(run_id)
    step = next(s for s in run.steps if s.tool == "forward")
    assert step.error is not None and step.error.code == "tool_denied"
    assert stack.receiver.received == []


async def test_runs_list_filters_by_channel(stack: Stack) -> None:
    response = await post(stack, event("ticket.closed"), "d-list")
    run_id = response.json()["runs"][0]["run_id"]

    async def listed() -> bool | None:
        runs = await stack.chamvi.list_runs(channel=stack.names["channel"], limit=50)
        return True if run_id in {r.run_id for r in runs} else None

    await eventually(listed, "the run listed under its channel")
    assert await stack.chamvi.list_runs(channel=f"other-{uuid.uuid4().hex[:6]}") == []
    async with stack.http() as http:
        answer = await http.get(
            "/runs", params={"channel": stack.names["channel"], "limit": 100}, headers=stack.auth
        )
    assert answer.status_code == 200 and run_id in {r["run_id"] for r in answer.json()["data"]}
    assert {r["channel"] for r in answer.json()["data"]} == {stack.names["channel"]}
