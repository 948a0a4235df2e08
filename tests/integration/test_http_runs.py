"""The run routes over real HTTP: dispatch, list, show, approve and cancel against a real worker."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from chamvi import App, ChamviClient, ToolContext, approve, define_agent, tool
from chamvi._constants import CONCURRENCY_LOCK_WORKFLOW, LOCK_ID_PREFIX
from chamvi.http import Token, create_api
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from tests.polling import eventually
from tests.support.http_api import bearer, make_tokens, serving


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys a version after a person approves."""
    decision = await approve(ctx, title=f"Deploy {version}?")
    return f"deployed {version}" if decision.approved else f"not deployed: {decision.reason or 'denied'}"


def make_app(echo: str, deployer: str) -> App:
    models = ModelRegistry()
    models.register("scripted/echo", ScriptedModel([reply("done")]))
    models.register(
        "scripted/deployer", ScriptedModel([call("deploy", "call-1", version="1.2"), reply("ok")])
    )
    return App(
        agents=[
            define_agent(name=echo, model="scripted/echo", instructions="Answer."),
            define_agent(name=deployer, model="scripted/deployer", instructions="Deploy.", tools=[deploy]),
        ],
        models=models,
    )


@dataclass
class Stack:
    url: str
    tokens: dict[str, Token]
    echo: str
    """The agents' names are unique to the test: listings read the whole namespace."""
    deployer: str

    def http(self, token: str | None = "admin") -> httpx.AsyncClient:
        headers = bearer(self.tokens[token]) if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    suffix = uuid.uuid4().hex[:8]
    echo, deployer = f"echo-{suffix}", f"deployer-{suffix}"
    app = make_app(echo, deployer)
    tokens = make_tokens(
        admin=["*"],
        dispatcher=["runs:dispatch", "runs:read"],
        other=["runs:dispatch"],
        approver=["runs:approve"],
        reader=["runs:read"],
        canceller=["runs:read", "runs:cancel"],
        knowledge=["knowledge:*"],
    )
    api = create_api(
        tokens=list(tokens.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue),
        agents=list(app.agents),
    )
    async with build_worker(client, app, task_queue=task_queue), serving(api) as url:
        yield Stack(url, tokens, echo, deployer)


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) - {"issues"} == {"code", "message"}, body
    # a validation error lists its field-by-field problems, other errors have none
    assert "issues" not in body["error"] or body["error"]["code"] == "validation_error", body
    return response.status_code, body["error"]["code"]


async def until_run(http: httpx.AsyncClient, run_id: str, status: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        response = await http.get(f"/runs/{run_id}")
        if response.status_code == 200 and response.json()["status"] == status:
            return dict(response.json())
        return None

    return await eventually(probe, f"run {run_id} becoming {status}")


async def until_listed(http: httpx.AsyncClient, run_ids: set[str], **params: Any) -> list[dict[str, Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        response = await http.get("/runs", params=params)
        assert response.status_code == 200, response.text
        data = list(response.json()["data"])
        return data if run_ids <= {r["run_id"] for r in data} else None

    return await eventually(probe, f"runs {run_ids} listed with {params}")


async def test_a_redelivered_dispatch_from_the_same_token_answers_200_with_the_same_run(stack: Stack) -> None:
    body = {"agent": stack.echo, "payload": {"ticket": 42}, "idempotency_key": "order-7"}
    async with stack.http("dispatcher") as dispatcher, stack.http("other") as other:
        first = await dispatcher.post("/runs", json=body)
        again = await dispatcher.post("/runs", json=body)
        elsewhere = await other.post("/runs", json=body)
        run = await until_run(dispatcher, first.json()["run_id"], "completed")
    assert first.status_code == 202 and first.json()["created"] is True
    assert again.status_code == 200 and again.json() == {"run_id": first.json()["run_id"], "created": False}
    assert elsewhere.status_code == 202 and elsewhere.json()["run_id"] != first.json()["run_id"]
    trigger = run["trigger"]
    assert (trigger["trigger"], trigger["payload"]) == ("http", {"ticket": 42})
    assert trigger["invoker"] == {
        "id": "dispatcher",
        "kind": "token",
        "name": None,
        "permissions": ["runs:dispatch", "runs:read"],
    }


async def test_a_run_is_shown_with_its_steps_and_output_and_listed_by_agent_and_status(stack: Stack) -> None:
    async with stack.http() as http:
        dispatched = [
            (await http.post("/runs", json={"agent": stack.echo, "concurrency_key": "mailbox"})).json()[
                "run_id"
            ]
            for _ in range(3)
        ]
        runs = [await until_run(http, run_id, "completed") for run_id in dispatched]
        listed = await until_listed(http, set(dispatched), agent=stack.echo, status="completed")
        first_page = (await http.get("/runs", params={"agent": stack.echo, "limit": 2})).json()
        second_page = (await http.get("/runs", params={"agent": stack.echo, "limit": 2, "offset": 2})).json()
        waiting = (await http.get("/runs", params={"agent": stack.echo, "status": "waiting"})).json()
        bad_status = await http.get("/runs", params={"status": "sleeping"})
        bad_agent = await http.get("/runs", params={"agent": "Not An Agent"})
        bad_limit = await http.get("/runs", params={"limit": 1000})
    run = runs[0]
    assert run["run_id"] == dispatched[0] and run["agent"] == stack.echo
    assert (run["output"], run["error"], run["waiting"], run["taint"]) == ("done", None, None, None)
    assert run["concurrency_key"] == "mailbox"
    assert [s["kind"] for s in run["steps"]] == ["llm"] and run["usage"]["output_tokens"] == 5
    assert {r["run_id"] for r in listed} == set(dispatched)
    assert all(r["agent"] == stack.echo and r["status"] == "completed" for r in listed)
    assert len(first_page["data"]) == 2 and first_page["meta"] == {"limit": 2, "offset": 0}
    assert len(second_page["data"]) == 1
    assert {r["run_id"] for r in first_page["data"] + second_page["data"]} == set(dispatched)
    assert waiting["data"] == []
    assert error_of(bad_status) == (422, "validation_error") and "query.status" in bad_status.text
    assert error_of(bad_agent) == (422, "validation_error") and "query.agent" in bad_agent.text
    assert error_of(bad_limit) == (422, "validation_error")


async def test_an_approval_is_answered_by_the_tokens_principal_and_a_stale_id_answers_409(
    stack: Stack,
) -> None:
    async with stack.http() as admin, stack.http("approver") as approver, stack.http("reader") as reader:
        run_id = (await admin.post("/runs", json={"agent": stack.deployer})).json()["run_id"]
        waiting = (await until_run(admin, run_id, "waiting"))["waiting"]
        forbidden = await reader.post(f"/runs/{run_id}/approve", json={"approval_id": "x", "approved": True})
        stale = await approver.post(
            f"/runs/{run_id}/approve", json={"approval_id": "9:x:0", "approved": True}
        )
        answered = await approver.post(
            f"/runs/{run_id}/approve",
            json={"approval_id": waiting["approval_id"], "approved": True, "reason": "release day"},
        )
        run = await until_run(admin, run_id, "completed")
        again = await approver.post(
            f"/runs/{run_id}/approve", json={"approval_id": waiting["approval_id"], "approved": True}
        )
    assert waiting["title"] == "Deploy 1.2?"
    assert error_of(forbidden) == (403, "forbidden")
    assert error_of(stale) == (409, "approval_not_pending") and "'9:x:0'" in stale.text
    assert answered.status_code == 200
    assert answered.json() == {"run_id": run_id, "approval_id": waiting["approval_id"], "approved": True}
    wait_step = next(s for s in run["steps"] if s["kind"] == "wait")
    assert wait_step["decision"]["approver"]["id"] == "approver"
    assert wait_step["decision"]["approver"]["kind"] == "token"
    assert wait_step["decision"]["reason"] == "release day"
    assert next(s for s in run["steps"] if s["kind"] == "tool")["output"] == "deployed 1.2"
    assert error_of(again)[0] == 409


async def test_a_cancelled_run_settles_cancelled_and_cancelling_it_again_answers_409(stack: Stack) -> None:
    async with stack.http() as http:
        run_id = (await http.post("/runs", json={"agent": stack.deployer})).json()["run_id"]
        await until_run(http, run_id, "waiting")
        cancelled = await http.post(f"/runs/{run_id}/cancel")
        run = await until_run(http, run_id, "cancelled")
        again = await http.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json() == {"run_id": run_id, "status": "cancelling"}
    assert run["status"] == "cancelled"
    assert error_of(again) == (409, "invalid_run_state") and "already ended" in again.text


async def test_unknown_runs_answer_404(stack: Stack) -> None:
    async with stack.http() as http:
        shown = await http.get("/runs/run-nope")
        approved = await http.post("/runs/run-nope/approve", json={"approval_id": "a", "approved": False})
        cancelled = await http.post("/runs/run-nope/cancel")
    assert error_of(shown) == (404, "run_not_found") and "'run-nope'" in shown.text
    assert error_of(approved) == (404, "run_not_found")
    assert error_of(cancelled) == (404, "run_not_found")


async def test_a_concurrency_lock_is_no_run_and_a_cancel_of_it_leaves_the_queued_run_to_start(
    stack: Stack, client: Client
) -> None:
    key = f"deploys-{uuid.uuid4().hex[:8]}"
    lock_id = LOCK_ID_PREFIX + key
    async with stack.http() as admin, stack.http("canceller") as canceller:
        holder = (await admin.post("/runs", json={"agent": stack.deployer, "concurrency_key": key})).json()
        queued = (await admin.post("/runs", json={"agent": stack.echo, "concurrency_key": key})).json()
        waiting = (await until_run(admin, holder["run_id"], "waiting"))["waiting"]
        shown = await canceller.get(f"/runs/{lock_id}")
        cancelled = await canceller.post(f"/runs/{lock_id}/cancel")
        approved = await admin.post(f"/runs/{lock_id}/approve", json={"approval_id": "a", "approved": True})
        lock = await client.get_workflow_handle(lock_id).describe()
        await admin.post(
            f"/runs/{holder['run_id']}/approve",
            json={"approval_id": waiting["approval_id"], "approved": True},
        )
        await until_run(admin, queued["run_id"], "completed")
    for refused in (shown, cancelled, approved):
        assert error_of(refused) == (404, "run_not_found") and repr(lock_id) in refused.text
    assert lock.workflow_type == CONCURRENCY_LOCK_WORKFLOW
    assert lock.status == WorkflowExecutionStatus.RUNNING


async def test_a_dispatch_is_checked_before_a_run_starts(stack: Stack) -> None:
    async with stack.http() as http:
        unknown = await http.post("/runs", json={"agent": "nobody"})
        invalid = await http.post("/runs", json={"agent": "Not Valid"})
        missing = await http.post("/runs", json={"payload": {}})
        extra = await http.post("/runs", json={"agent": stack.echo, "colour": "red"})
        empty_key = await http.post("/runs", json={"agent": stack.echo, "idempotency_key": ""})
        nan = await http.post(
            "/runs",
            content=b'{"agent": "%s", "payload": NaN}' % stack.echo.encode(),
            headers={"content-type": "application/json"},
        )
    assert error_of(unknown) == (404, "agent_not_found") and repr(stack.echo) in unknown.text
    assert error_of(invalid) == (422, "validation_error") and "body.agent" in invalid.text
    assert error_of(missing) == (422, "validation_error") and "body.agent" in missing.text
    assert error_of(extra) == (422, "validation_error") and "body.colour" in extra.text
    assert error_of(empty_key) == (422, "validation_error") and "body.idempotency_key" in empty_key.text
    assert error_of(nan) == (422, "validation_error") and "body.payload" in nan.text
    assert missing.json()["error"]["issues"] == [
        {"path": ["body", "agent"], "message": "Field required", "code": "missing"}
    ]
    assert "issues" not in unknown.json()["error"]


async def test_run_routes_need_their_permissions(stack: Stack) -> None:
    async with (
        stack.http("reader") as reader,
        stack.http("knowledge") as knowledge,
        stack.http(None) as nobody,
    ):
        dispatch = await reader.post("/runs", json={"agent": stack.echo})
        listing = await knowledge.get("/runs")
        cancel = await reader.post("/runs/run-nope/cancel")
        anonymous = await nobody.get("/runs")
        read = await reader.get("/runs")
    assert error_of(dispatch) == (403, "forbidden") and "'runs:dispatch'" in dispatch.text
    assert error_of(listing) == (403, "forbidden") and error_of(cancel) == (403, "forbidden")
    assert error_of(anonymous) == (401, "unauthorized")
    assert read.status_code == 200
