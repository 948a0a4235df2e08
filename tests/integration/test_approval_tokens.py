"""Approvals answered by the token a channel's request carries: the client, the HTTP API, the CLI.

A console channel captures the request's lines; the token in them answers the one approval, once,
without the run or approval id, and a forged, expired or stale token is refused with its code and
nothing else about the run.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from click.testing import CliRunner, Result
from temporalio.client import Client

from chamvi import (
    AgentHooks,
    App,
    ApprovalDecision,
    ApprovalNotPendingError,
    ApprovalTokenExpiredError,
    ApprovalTokenInvalidError,
    ApprovalTokens,
    ChamviClient,
    InvalidInputError,
    Invoker,
    RunStatus,
    RunView,
    ToolCallInfo,
    ToolContext,
    console_channel,
    define_agent,
    tool,
)
from chamvi.cli import cli
from chamvi.http import create_api
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker, local_plugin
from tests.integration.test_http_server import access_log
from tests.polling import eventually, until_status
from tests.support.http_api import bearer, make_tokens, serving

SECRET = "integration-approval-secret-0123456789"
TOKENS = ApprovalTokens(SECRET)
TOKEN = re.compile(r"ca1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


@tool
async def restart(service: str, ctx: ToolContext) -> str:
    """Restarts a service once a person on the console says yes."""
    decision = await ctx.channels.find_one_or_fail("console").approve(
        title=f"Restart {service}?", body="Everyone is logged out."
    )
    if not decision.approved:
        return f"kept {service}: {decision.reason or 'denied'}"
    return f"restarted {service} (approved by {decision.approver.id if decision.approver else 'someone'})"


def make_app(lines: list[str]) -> App:
    models = ModelRegistry()
    models.register(
        "scripted/operator", ScriptedModel([call("restart", "call-1", service="api"), reply("done")])
    )
    agent = define_agent(name="operator", model="scripted/operator", instructions="Operate.", tools=[restart])
    return App(agents=[agent], models=models, channels=[console_channel("console", write=lines.append)])


@dataclass
class Waiting:
    run_id: str
    token: str
    lines: list[str]


@pytest.fixture
async def waiting(client: Client, task_queue: str, chamvi: ChamviClient) -> AsyncIterator[Waiting]:
    """A run waiting on its console approval, and the token its request carried."""
    lines: list[str] = []
    async with build_worker(
        client, local_plugin(make_app(lines), approval_tokens=TOKENS), task_queue=task_queue
    ):
        run_id = (await chamvi.dispatch("operator")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        found = TOKEN.search("\n".join(lines))
        assert found is not None, lines
        yield Waiting(run_id, found.group(0), lines)


def checking(client: Client, task_queue: str) -> ChamviClient:
    return ChamviClient(client, task_queue=task_queue, approval_tokens=TOKENS)


async def test_a_waiting_run_is_answered_by_its_token_once_and_records_the_token_holder(
    client: Client, task_queue: str, waiting: Waiting
) -> None:
    chamvi = checking(client, task_queue)
    assert waiting.lines[0] == "[console -> console] Approval needed: Restart api?"
    assert waiting.lines[3] == f"Approve with `chamvi approve --token {waiting.token}` (or `--deny`)."
    resumed = await chamvi.approvals.resume(waiting.token, ApprovalDecision(approved=True))
    assert (resumed.run_id, resumed.approval_id, resumed.approved) == (waiting.run_id, "0:call-1:0", True)
    run = await chamvi.wait(waiting.run_id)
    assert run.status == RunStatus.COMPLETED
    assert next(s for s in run.steps if s.kind == "tool").output == "restarted api (approved by token holder)"
    wait_step = next(s for s in run.steps if s.kind == "wait")
    assert wait_step.decision is not None and wait_step.decision.approver == Invoker(
        id="token holder", kind="approval_token"
    )
    with pytest.raises(ApprovalNotPendingError, match="not pending any more") as again:
        await chamvi.approvals.resume(waiting.token, ApprovalDecision(approved=False))
    assert again.value.code == "approval_not_pending" and "call-1" not in again.value.message
    # the token is signed, never stored: no payload of the run's history (what the Temporal UI shows) holds it
    history = (await client.get_workflow_handle(run.run_id).fetch_history()).to_json()
    payloads = [base64.b64decode(data) for data in re.findall(r'"data": ?"([A-Za-z0-9+/=]+)"', history)]
    assert any(b"Restart api?" in payload for payload in payloads)  # the request itself is there
    assert not any(b"ca1." in payload for payload in payloads)


async def test_a_forged_expired_or_stale_token_is_refused_with_its_code_and_nothing_about_the_run(
    client: Client, task_queue: str, waiting: Waiting
) -> None:
    chamvi = checking(client, task_queue)
    no = ApprovalDecision(approved=False)
    with pytest.raises(ApprovalTokenInvalidError) as forged:
        await chamvi.approvals.resume(waiting.token[:-4] + "AAAA", no)
    with pytest.raises(ApprovalTokenInvalidError):
        await chamvi.approvals.resume(
            ApprovalTokens("another-secret-" * 3).issue(
                waiting.run_id, "0:call-1:0", expires=datetime.now(UTC) + timedelta(hours=1), detail=True
            ),
            no,
        )
    past = TOKENS.issue(
        waiting.run_id, "0:call-1:0", expires=datetime.now(UTC) - timedelta(seconds=1), detail=True
    )
    with pytest.raises(ApprovalTokenExpiredError) as expired:
        await chamvi.approvals.resume(past, no)
    stale = TOKENS.issue(
        waiting.run_id, "7:call-9:0", expires=datetime.now(UTC) + timedelta(hours=1), detail=True
    )
    with pytest.raises(ApprovalNotPendingError) as not_pending:
        await chamvi.approvals.resume(stale, no)
    gone = TOKENS.issue(
        "run-operator-nope", "0:call-1:0", expires=datetime.now(UTC) + timedelta(hours=1), detail=True
    )
    with pytest.raises(ApprovalNotPendingError):
        await chamvi.approvals.pending(gone)
    for refused in (forged.value, expired.value, not_pending.value):
        assert waiting.run_id not in refused.message and "call-1" not in refused.message
    assert (forged.value.code, expired.value.code) == ("approval_token_invalid", "approval_token_expired")
    with pytest.raises(InvalidInputError, match="cannot check approval tokens"):
        await ChamviClient(client, task_queue=task_queue).approvals.resume(waiting.token, no)
    # none of it answered anything: the run still waits, and its own token still works
    assert (await chamvi.approvals.pending(waiting.token)).approval_id == "0:call-1:0"
    await chamvi.approvals.resume(waiting.token, no)
    assert (await chamvi.wait(waiting.run_id)).status == RunStatus.COMPLETED


async def test_the_http_api_shows_and_answers_the_approval_a_token_names_and_logs_no_token(
    client: Client, task_queue: str, waiting: Waiting, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = make_tokens(approver=["runs:read"], support=["runs:dispatch"])
    chamvi = checking(client, task_queue)
    api = create_api(tokens=list(tokens.values()), managed=None, runs=chamvi)
    async with serving(api, log_level="info") as url, httpx.AsyncClient(base_url=url) as http:
        with access_log(caplog) as access:
            shown = await http.post("/approvals/view", json={"token": waiting.token})
            assert shown.status_code == 200, shown.text
            view = shown.json()
            assert (view["run_id"], view["approval_id"], view["agent"], view["tool"]) == (
                waiting.run_id,
                "0:call-1:0",
                "operator",
                "restart",
            )
            assert (view["title"], view["body"]) == ("Restart api?", "Everyone is logged out.")
            assert "input" not in view

            unknown = await http.post(
                "/approvals/answer",
                json={"token": waiting.token, "approved": True},
                headers={"authorization": "Bearer nope"},
            )
            assert unknown.status_code == 401 and unknown.json()["error"]["code"] == "unauthorized"
            forged = await http.post(
                "/approvals/answer", json={"token": waiting.token + "x", "approved": True}
            )
            assert forged.status_code == 403 and forged.json()["error"]["code"] == "approval_token_invalid"
            past = TOKENS.issue(
                waiting.run_id, "0:call-1:0", expires=datetime.now(UTC) - timedelta(seconds=1), detail=True
            )
            expired = await http.post("/approvals/view", json={"token": past})
            assert expired.status_code == 410 and expired.json()["error"]["code"] == "approval_token_expired"

            answered = await http.post(
                "/approvals/answer",
                json={"token": waiting.token, "approved": True, "reason": "after hours"},
                headers=bearer(tokens["approver"]),
            )
            assert answered.status_code == 200, answered.text
            assert answered.json() == {
                "run_id": waiting.run_id,
                "approval_id": "0:call-1:0",
                "approved": True,
            }
            again = await http.post("/approvals/answer", json={"token": waiting.token, "approved": False})
            assert again.status_code == 409 and again.json()["error"]["code"] == "approval_not_pending"
            assert waiting.run_id not in again.text
            shown_after = await http.post("/approvals/view", json={"token": waiting.token})
            assert shown_after.status_code == 409
            paths = (await http.get("/openapi.json")).json()["paths"]
            for path in ("/approvals/view", "/approvals/answer"):
                operation = paths[path]["post"]
                assert "security" not in operation and "x-permission" not in operation
                assert {"403", "409", "410"} <= set(operation["responses"])
    run = await chamvi.wait(waiting.run_id)
    assert next(s for s in run.steps if s.kind == "tool").output == "restarted api (approved by approver)"
    requests = [line.split('"')[1] for line in access]
    assert requests[:2] == ["POST /approvals/view HTTP/1.1", "POST /approvals/answer HTTP/1.1"]
    assert "ca1." not in caplog.text


def chamvi_approve(
    client: Client, task_queue: str, *args: str, stdin: str | None = None, **env: str
) -> asyncio.Future[Result]:
    """``chamvi approve ...`` in a thread of its own, with ``env`` as its environment's additions."""
    address = client.service_client.config.target_host
    argv = [
        "approve",
        *args,
        "--address",
        address,
        "--namespace",
        client.namespace,
        "--task-queue",
        task_queue,
    ]
    return asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, cli, argv, input=stdin, env=env))


async def test_chamvi_approve_token_answers_the_approval_and_refuses_a_second_use(
    client: Client, task_queue: str, waiting: Waiting, tmp_path
) -> None:
    nowhere = await chamvi_approve(
        client, task_queue, "--token", waiting.token, CHAMVI_DATA=str(tmp_path), CHAMVI_APPROVAL_SECRET=""
    )
    assert (
        nowhere.exit_code == 1
        and "no approval secret" in nowhere.output
        and "approval-secret" in nowhere.output
    )
    both = await chamvi_approve(client, task_queue, waiting.run_id, "--token", waiting.token)
    assert both.exit_code == 2 and "pass no RUN" in both.output

    denied = await chamvi_approve(
        client,
        task_queue,
        "--token",
        "-",
        "--deny",
        "--reason",
        "not tonight",
        stdin=waiting.token + "\n",
        CHAMVI_APPROVAL_SECRET=SECRET,
    )
    assert denied.exit_code == 0, denied.output
    assert denied.stdout.strip() == f"denied 0:call-1:0 on run {waiting.run_id}"
    again = await chamvi_approve(client, task_queue, "--token", waiting.token, CHAMVI_APPROVAL_SECRET=SECRET)
    assert again.exit_code == 1 and "not pending any more" in again.output
    run = await checking(client, task_queue).wait(waiting.run_id)
    assert next(s for s in run.steps if s.kind == "tool").output == "kept api: not tonight"
    wait_step = next(s for s in run.steps if s.kind == "wait")
    assert wait_step.decision is not None and wait_step.decision.approver is not None
    assert wait_step.decision.approver.kind == "cli"


async def test_a_request_asked_again_for_new_arguments_sends_a_new_token_and_the_old_one_is_stale(
    client: Client, task_queue: str
) -> None:
    lines: list[str] = []
    price = {"now": 10}

    @tool
    async def buy(amount: int, ctx: ToolContext) -> str:
        """Buys at the current price, once the console says yes."""
        decision = await ctx.channels.find_one_or_fail("console").approve(title=f"Pay {amount}?")
        return f"paid {amount}" if decision.approved else "not paid"

    def price_now(info: ToolCallInfo, ctx: ToolContext) -> dict[str, object]:
        return {"amount": price["now"]}

    models = ModelRegistry()
    models.register("scripted/buyer", ScriptedModel([call("buy", "call-1", amount=0), reply("ok")]))
    agent = define_agent(
        name="buyer",
        model="scripted/buyer",
        instructions="Buy.",
        tools=[buy],
        hooks=AgentHooks(before_tool_execution=price_now),
    )
    app = App(agents=[agent], models=models, channels=[console_channel("console", write=lines.append)])
    chamvi = checking(client, task_queue)
    async with build_worker(client, local_plugin(app, approval_tokens=TOKENS), task_queue=task_queue):
        run_id = (await chamvi.dispatch("buyer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        first = TOKEN.findall("\n".join(lines))
        price["now"] = 25  # the price moves while the person reads the request
        await chamvi.approvals.resume(first[0], ApprovalDecision(approved=True))

        async def asked_again() -> RunView | None:
            view = await chamvi.get_run(run_id)
            return view if view.waiting is not None and view.waiting.approval_id == "0:call-1:1" else None

        await eventually(asked_again, "a second approval for the new price")
        tokens = TOKEN.findall("\n".join(lines))
        assert len(tokens) == 2 and "Pay 25?" in "\n".join(lines)
        with pytest.raises(ApprovalNotPendingError):
            await chamvi.approvals.resume(first[0], ApprovalDecision(approved=True))
        await chamvi.approvals.resume(tokens[1], ApprovalDecision(approved=True))
        run = await chamvi.wait(run_id)
    assert next(s for s in run.steps if s.kind == "tool").output == "paid 25"
