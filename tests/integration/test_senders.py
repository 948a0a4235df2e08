"""The real world's senders against a real stack: each scheme signed by its sender's own code.

GitHub deliveries are signed by octokit (``@octokit/webhooks-methods``, through ``node``) over
GitHub's example payloads (``@octokit/webhooks-examples``); Standard Webhooks by the reference
``standardwebhooks`` package; Slack by ``slack_sdk``'s ``SignatureVerifier``; Stripe by ``stripe``'s
``WebhookSignature``. Replies go to loopback servers that stand in for GitHub's REST API, Slack's Web
API and a Standard Webhooks receiver, and record what they got. Runs are real runs on the session's
Temporal server; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import stripe
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from slack_sdk.signature import SignatureVerifier
from standardwebhooks import Webhook
from temporalio.client import Client

from chamvi import (
    App,
    ChamviClient,
    ChannelSubscription,
    GitHubComments,
    RunStatus,
    SlackMessages,
    ToolContext,
    define_agent,
    effect_marker,
    tool,
)
from chamvi.http import create_api
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.webhooks import signed_headers, webhook_channel
from tests.support.http_api import make_tokens, serving
from tests.support.npm import NODE_TESTS, node_missing

NODE_SENDER = NODE_TESTS / "github_sender.mjs"
GITHUB_SECRET = "github-webhook-secret-0123"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
STRIPE_SECRET = "whsec_stripe_test_0123456789abcdef"
STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CHAMVI_SECRET = "chamvi-secret-0123456789"
GITHUB_TOKEN = "ghs_loopback_token"
SLACK_TOKEN = "xoxb-loopback-token"


def node_ready() -> str | None:
    """Why the octokit-signed tests cannot run here, or None when they can."""
    return node_missing("@octokit/webhooks-methods")


async def octokit(
    event: str, action: str | None = None, *, form: bool = False, secret: str = GITHUB_SECRET, **patch: Any
) -> Delivery:
    """A GitHub delivery of GitHub's example payload, signed by octokit as GitHub signs it."""
    process = await asyncio.create_subprocess_exec(
        "node",
        str(NODE_SENDER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    request = {"secret": secret, "event": event, "action": action, "form": form, "patch": patch}
    out, err = await process.communicate(json.dumps(request).encode())
    assert process.returncode == 0, err.decode()
    signed = json.loads(out)
    return Delivery(
        body=signed["body"].encode(),
        headers={
            "Content-Type": signed["content_type"],
            "X-Hub-Signature-256": signed["signature"],
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "User-Agent": "GitHub-Hookshot/loopback",
        },
    )


@dataclass
class Delivery:
    body: bytes
    headers: dict[str, str]


@dataclass
class Recorder:
    """A loopback API: records each request, answers with the statuses it is told, then 200."""

    statuses: list[int] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    comments: list[dict[str, Any]] = field(default_factory=list)

    def github(self) -> FastAPI:
        api = FastAPI()

        @api.post("/repos/{owner}/{repo}/issues/{number}/comments")
        async def create(owner: str, repo: str, number: int, request: Request) -> Response:
            body = await request.json()
            self.requests.append(("POST", request.url.path, dict(request.headers), body))
            comment = {"id": len(self.comments) + 1, "body": body["body"]}
            self.comments.append(comment)  # saved, whatever the answer says (a lost answer)
            status = self.statuses.pop(0) if self.statuses else 201
            return JSONResponse(comment, status_code=status)

        @api.get("/repos/{owner}/{repo}/issues/{number}/comments")
        async def listed(owner: str, repo: str, number: int, request: Request) -> Response:
            self.requests.append(("GET", request.url.path, dict(request.headers), None))
            return JSONResponse(self.comments)

        return api

    def slack(self) -> FastAPI:
        api = FastAPI()

        @api.post("/api/chat.postMessage")
        async def post(request: Request) -> Response:
            body = await request.json()
            self.requests.append(("POST", request.url.path, dict(request.headers), body))
            self.comments.append(
                {"ts": "1700000001.000200", "text": body["text"], "metadata": body["metadata"]}
            )
            status = self.statuses.pop(0) if self.statuses else 200
            return JSONResponse({"ok": True, "channel": body["channel"], "ts": "1700000001.000200"}, status)

        @api.get("/api/conversations.replies")
        async def replies(request: Request) -> Response:
            self.requests.append(("GET", request.url.path, dict(request.headers), dict(request.query_params)))
            return JSONResponse({"ok": True, "messages": self.comments})

        return api

    def standard(self) -> FastAPI:
        api = FastAPI()

        @api.post("/hook")
        async def hook(request: Request) -> Response:
            raw = await request.body()
            # the receiver checks as the reference library checks: a bad signature raises here
            payload = Webhook(STANDARD_SECRET).verify(raw, dict(request.headers))
            self.requests.append(("POST", request.url.path, dict(request.headers), payload))
            return Response(status_code=204)

        return api


@tool
async def answer(text: str, ctx: ToolContext) -> str:
    """Answers where the run came from."""
    await ctx.channels.find_one_or_fail().emit(text)
    return "answered"


@dataclass
class Stack:
    url: str
    chamvi: ChamviClient
    names: dict[str, str]
    github: Recorder
    slack: Recorder
    standard: Recorder

    async def post(self, scheme: str, delivery: Delivery) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as http:
            return await http.post(
                f"/channels/{self.names[scheme]}/events", content=delivery.body, headers=delivery.headers
            )


def make_app(suffix: str, github_url: str, slack_url: str, standard_url: str) -> tuple[App, dict[str, str]]:
    names = {scheme: f"{scheme}-{suffix}" for scheme in ("github", "slack", "stripe", "standard", "chamvi")}
    models = ModelRegistry()
    models.register("scripted/answer", ScriptedModel([call("answer", "c1", text="On it."), reply("ok")]))
    models.register("scripted/done", ScriptedModel([reply("done")], repeat_last=True))

    def agent(scheme: str, subscription: ChannelSubscription, model: str = "scripted/answer") -> Any:
        return define_agent(
            name=f"{scheme}-agent-{suffix}",
            model=model,
            instructions="Answer.",
            tools=[answer],
            channels=[subscription],
        )

    opened: Callable[[Any], bool] = lambda e: e.event == "issues" and e.payload["action"] == "opened"  # noqa: E731
    app = App(
        agents=[
            agent("github", ChannelSubscription(names["github"], id="opened", filter=opened)),
            agent("slack", ChannelSubscription(names["slack"], id="mentions", events=["app_mention"])),
            agent(
                "stripe",
                ChannelSubscription(names["stripe"], id="paid", events=["invoice.paid"]),
                "scripted/done",
            ),
            agent(
                "standard", ChannelSubscription(names["standard"], id="tickets", events=["ticket.created"])
            ),
            agent("chamvi", ChannelSubscription(names["chamvi"], id="all"), "scripted/done"),
        ],
        models=models,
        channels=[
            webhook_channel(
                names["github"],
                scheme="github",
                secret=GITHUB_SECRET,
                reply=GitHubComments(token=GITHUB_TOKEN, api_url=github_url),
            ),
            webhook_channel(
                names["slack"],
                scheme="slack",
                secret=SLACK_SECRET,
                reply=SlackMessages(token=SLACK_TOKEN, api_url=f"{slack_url}/api"),
            ),
            webhook_channel(names["stripe"], scheme="stripe", secret=STRIPE_SECRET),
            webhook_channel(
                names["standard"],
                scheme="standard-webhooks",
                secret=STANDARD_SECRET,
                url=f"{standard_url}/hook",
                address_of=lambda payload: payload["data"]["ticket"],
            ),
            webhook_channel(names["chamvi"], secret=CHAMVI_SECRET),
        ],
    )
    return app, names


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    github, slack, standard = Recorder(), Recorder(), Recorder()
    chamvi = ChamviClient(client, task_queue=task_queue)
    async with (
        serving(github.github()) as github_url,
        serving(slack.slack()) as slack_url,
        serving(standard.standard()) as standard_url,
    ):
        app, names = make_app(uuid.uuid4().hex[:8], github_url, slack_url, standard_url)
        api = create_api(
            tokens=list(make_tokens(admin=["*"]).values()), managed=None, runs=chamvi, inbound=app
        )
        async with build_worker(client, app, task_queue=task_queue), serving(api) as url:
            yield Stack(url, chamvi, names, github, slack, standard)


# ---- each scheme's sender ------------------------------------------------------------------------


def standard(n: str, *, at: float | None = None, secret: str = STANDARD_SECRET) -> Delivery:
    body = json.dumps({"type": "ticket.created", "data": {"ticket": f"T-{n}"}}).encode()
    stamp = datetime.fromtimestamp(int(time.time() if at is None else at), tz=UTC)
    msg_id = f"msg_{n}"
    return Delivery(
        body,
        {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(stamp.timestamp())),
            "webhook-signature": Webhook(secret).sign(msg_id, stamp, body.decode()),
        },
    )


def slack(
    n: str, *, at: float | None = None, secret: str = SLACK_SECRET, extra: dict[str, str] | None = None
) -> Delivery:
    event = {
        "type": "app_mention",
        "channel": "C024BE91L",
        "user": "U2147483697",
        "text": "<@U0LAN0Z89> help",
    }
    body = json.dumps(
        {
            "token": "ZZZZZZWSxiZZZ2yIvs3peJ",
            "team_id": "T123ABC456",
            "api_app_id": "A123ABC456",
            "event": {**event, "ts": "1355517523.000005"},
            "type": "event_callback",
            "event_id": f"Ev{n}",
            "event_time": 1355517523,
        }
    ).encode()
    stamp = str(int(time.time() if at is None else at))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return Delivery(
        body,
        {
            "content-type": "application/json",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
            **(extra or {}),
        },
    )


def stripe_event(n: str, *, at: float | None = None, secret: str = STRIPE_SECRET) -> Delivery:
    body = json.dumps(
        {"id": f"evt_{n}", "object": "event", "type": "invoice.paid", "data": {"object": {"id": f"in_{n}"}}}
    ).encode()
    stamp = int(time.time() if at is None else at)
    header = stripe.WebhookSignature.generate_signature_header(body.decode(), secret, timestamp=stamp)
    return Delivery(body, {"content-type": "application/json", "Stripe-Signature": header})


def chamvi_event(n: str, *, at: float | None = None, secret: str = CHAMVI_SECRET) -> Delivery:
    body = json.dumps({"type": "ticket.created", "n": n}).encode()
    stamp = None if at is None else int(at)
    return Delivery(body, signed_headers(secret, body, delivery=f"d-{n}", timestamp=stamp))


def renamed(scheme: str, delivery: Delivery) -> Delivery:
    """The same signed request under a new delivery id, as an attacker who captured it would send it."""
    headers, body = dict(delivery.headers), delivery.body
    if scheme == "standard":
        headers["webhook-id"] = "msg_invented"
    elif scheme == "chamvi":
        headers["X-Chamvi-Delivery"] = "d-invented"
    elif scheme == "github":
        headers["X-GitHub-Delivery"] = str(uuid.uuid4())
    else:  # Slack and Stripe carry the id in the signed body
        field_name = "event_id" if scheme == "slack" else "id"
        body = json.dumps({**json.loads(body), field_name: "invented"}).encode()
    return Delivery(body, headers)


SENDERS: dict[str, Callable[..., Delivery]] = {
    "standard": standard,
    "slack": slack,
    "stripe": stripe_event,
    "chamvi": chamvi_event,
}


async def deliver(scheme: str, n: str, **options: Any) -> Delivery:
    if scheme == "github":
        return await octokit("issues", "opened", secret=options.get("secret", GITHUB_SECRET), chamvi_n=n)
    return SENDERS[scheme](n, **options)


def schemes_with_node() -> list[Any]:
    reason = node_ready()
    github = pytest.param("github", marks=pytest.mark.skipif(reason is not None, reason=reason or ""))
    return [github, "standard", "slack", "stripe", "chamvi"]


@pytest.mark.parametrize("scheme", schemes_with_node())
async def test_each_senders_delivery_starts_exactly_one_run_and_its_redelivery_none(
    stack: Stack, scheme: str
) -> None:
    first = await deliver(scheme, "1")
    started = await stack.post(scheme, first)
    assert started.status_code == 202, started.text
    (run,) = started.json()["runs"]
    again = await stack.post(scheme, first)
    assert again.status_code == 200 and again.json()["runs"][0]["run_id"] == run["run_id"]
    other = await stack.post(scheme, await deliver(scheme, "2"))
    assert other.status_code == 202 and other.json()["runs"][0]["run_id"] != run["run_id"]
    view = await stack.chamvi.wait(run["run_id"])
    assert view.status == RunStatus.COMPLETED, view.error
    assert view.trigger.event == started.json()["event"] != None  # noqa: E711


@pytest.mark.parametrize("scheme", schemes_with_node())
async def test_each_sender_refuses_a_wrong_secret(stack: Stack, scheme: str) -> None:
    wrong = {
        "github": "wrong-github-secret-0123",
        "standard": "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
        "slack": "wrong-slack-secret-0123456789abcd",
        "stripe": "whsec_wrong_0123456789abcdef",
        "chamvi": "wrong-chamvi-secret-0123",
    }[scheme]
    refused = await stack.post(scheme, await deliver(scheme, "w", secret=wrong))
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "invalid_signature")


@pytest.mark.parametrize("scheme", ["standard", "slack", "stripe", "chamvi"])
async def test_each_sender_with_a_timestamp_refuses_a_stale_one(stack: Stack, scheme: str) -> None:
    stale = await stack.post(scheme, await deliver(scheme, "s", at=time.time() - 600))
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_delivery")


@pytest.mark.parametrize("scheme", ["standard", "slack", "stripe", "chamvi"])
async def test_a_captured_request_resent_under_a_new_id_is_refused(stack: Stack, scheme: str) -> None:
    captured = await deliver(scheme, "c")
    assert (await stack.post(scheme, captured)).status_code == 202
    replay = await stack.post(scheme, renamed(scheme, captured))
    assert (replay.status_code, replay.json()["error"]["code"]) == (401, "invalid_signature")


# ---- GitHub --------------------------------------------------------------------------------------

needs_node = pytest.mark.skipif(node_ready() is not None, reason=node_ready() or "")


@needs_node
async def test_a_github_issue_opened_signed_by_octokit_comments_on_that_issue_once(stack: Stack) -> None:
    delivery = await octokit("issues", "opened")
    started = await stack.post("github", delivery)
    assert started.status_code == 202, started.text
    assert started.json()["event"] == "issues"
    assert started.json()["delivery"] == delivery.headers["X-GitHub-Delivery"]
    (run,) = started.json()["runs"]
    view = await stack.chamvi.wait(run["run_id"])
    assert view.status == RunStatus.COMPLETED, view.error
    assert (view.trigger.event, view.trigger.address) == ("issues", "Codertocat/Hello-World#1")
    ((method, path, headers, body),) = stack.github.requests
    assert (method, path) == ("POST", "/repos/Codertocat/Hello-World/issues/1/comments")
    assert headers["authorization"] == f"Bearer {GITHUB_TOKEN}"
    assert headers["accept"] == "application/vnd.github+json" and headers["x-github-api-version"]
    key = body["body"].split("<!-- chamvi:effect:")[1].split(" -->")[0]
    assert body == {"body": f"On it.\n\n{effect_marker(key)}"} and key.startswith(f"{run['run_id']}:emit:")
    # GitHub signs no timestamp and not the GUID: a replay under a new GUID answers the same run
    replayed = await stack.post("github", renamed("github", delivery))
    assert replayed.status_code == 200 and replayed.json()["runs"][0]["run_id"] == run["run_id"]


@needs_node
async def test_a_form_encoded_github_delivery_starts_its_run_and_other_actions_start_none(
    stack: Stack,
) -> None:
    started = await stack.post("github", await octokit("issues", "opened", form=True))
    assert started.status_code == 202, started.text
    assert len(started.json()["runs"]) == 1
    labeled = await stack.post("github", await octokit("issues", "labeled"))
    assert (labeled.status_code, labeled.json()["runs"]) == (202, [])


@needs_node
async def test_a_github_ping_answers_200_and_starts_nothing(stack: Stack) -> None:
    ping = await octokit("ping")
    answered = await stack.post("github", ping)
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"delivery": ping.headers["X-GitHub-Delivery"], "event": "ping", "runs": []}


@needs_node
async def test_a_comment_a_crashed_attempt_posted_is_found_by_its_marker_and_not_posted_twice(
    stack: Stack,
) -> None:
    stack.github.statuses[:] = [502]  # GitHub saved the comment, but its answer was lost
    started = await stack.post("github", await octokit("issues", "opened"))
    view = await stack.chamvi.wait(started.json()["runs"][0]["run_id"])
    assert view.status == RunStatus.COMPLETED, view.error
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _, _ in stack.github.requests] == [
        ("POST", "comments"),
        ("GET", "comments"),
    ]
    assert len(stack.github.comments) == 1


# ---- Slack ---------------------------------------------------------------------------------------


async def test_a_slack_mention_answers_in_its_thread_and_slacks_retry_starts_nothing(stack: Stack) -> None:
    first = slack("m1")
    started = await stack.post("slack", first)
    assert started.status_code == 202, started.text
    (run,) = started.json()["runs"]
    # Slack retries with a fresh timestamp and signature, the same event_id
    retry = slack("m1", extra={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    retried = await stack.post("slack", retry)
    assert retried.status_code == 200 and retried.json()["runs"][0]["run_id"] == run["run_id"]
    view = await stack.chamvi.wait(run["run_id"])
    assert view.status == RunStatus.COMPLETED, view.error
    assert (view.trigger.event, view.trigger.address) == ("app_mention", "C024BE91L:1355517523.000005")
    ((method, path, headers, body),) = stack.slack.requests
    assert (method, path) == ("POST", "/api/chat.postMessage")
    assert headers["authorization"] == f"Bearer {SLACK_TOKEN}"
    assert headers["content-type"].startswith("application/json")
    key = body["metadata"]["event_payload"]["key"]
    assert key.startswith(f"{run['run_id']}:emit:")
    assert body == {
        "channel": "C024BE91L",
        "thread_ts": "1355517523.000005",
        "text": "On it.",
        "metadata": {"event_type": "chamvi_effect", "event_payload": {"key": key}},
    }


async def test_a_slack_message_a_crashed_attempt_posted_is_found_in_the_thread_and_not_posted_twice(
    stack: Stack,
) -> None:
    stack.slack.statuses[:] = [503]  # Slack posted it, but its answer was lost
    started = await stack.post("slack", slack("crash"))
    view = await stack.chamvi.wait(started.json()["runs"][0]["run_id"])
    assert view.status == RunStatus.COMPLETED, view.error
    assert [(m, p) for m, p, _, _ in stack.slack.requests] == [
        ("POST", "/api/chat.postMessage"),
        ("GET", "/api/conversations.replies"),
    ]
    query = stack.slack.requests[1][3]
    assert (query["channel"], query["ts"], query["include_all_metadata"]) == (
        "C024BE91L",
        "1355517523.000005",
        "true",
    )
    assert len(stack.slack.comments) == 1


async def test_slacks_url_verification_is_answered_with_its_challenge(stack: Stack) -> None:
    body = json.dumps(
        {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "type": "url_verification",
        }
    ).encode()
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    answered = await stack.post(
        "slack", Delivery(body, {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature})
    )
    assert answered.status_code == 200
    assert answered.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


# ---- Standard Webhooks out -----------------------------------------------------------------------


async def test_a_standard_webhooks_channels_reply_is_signed_so_the_reference_library_verifies_it(
    stack: Stack,
) -> None:
    started = await stack.post("standard", standard("out"))
    view = await stack.chamvi.wait(started.json()["runs"][0]["run_id"])
    assert view.status == RunStatus.COMPLETED, view.error
    ((_, _, headers, payload),) = stack.standard.requests
    assert payload["address"] == "T-out" and payload["body"] == "On it."
    assert headers["webhook-id"] == headers["idempotency-key"] == payload["key"]
