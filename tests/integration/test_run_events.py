"""Run events from the history long-poll: ``ChamviClient.events`` and ``GET /runs/{id}/events`` (SSE)
against a real worker and a real Temporal dev server."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, ChamviPlugin, RunStatus, ToolContext, approve, define_agent, tool
from chamvi.http import Token, create_api
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.run_events import RunEvent
from chamvi.runtime import build_worker, local_plugin
from tests.polling import eventually, until_status
from tests.support.http_api import bearer, make_tokens, serving

EXPECTED = ["run.started", "run.step", "run.waiting", "run.resumed", "run.step", "run.step", "run.completed"]


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys a version after a person approves."""
    decision = await approve(ctx, title=f"Deploy {version}?", body="prod, 3 hosts")
    return f"deployed {version}" if decision.approved else f"not deployed: {decision.reason or 'denied'}"


@dataclass
class Stack:
    url: str
    tokens: dict[str, Token]
    runs: ChamviClient
    """The client behind the API, whose open streams a test counts."""
    agent: str
    app: App
    plugin: ChamviPlugin

    def http(self, token: str | None = "reader") -> httpx.AsyncClient:
        headers = bearer(self.tokens[token]) if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    agent = f"deployer-{uuid.uuid4().hex[:8]}"
    models = ModelRegistry()
    models.register(
        "scripted/deployer", ScriptedModel([call("deploy", "call-1", version="1.2"), reply("shipped")])
    )
    app = App(
        agents=[define_agent(name=agent, model="scripted/deployer", instructions="Deploy.", tools=[deploy])],
        models=models,
    )
    tokens = make_tokens(reader=["runs:read"], dispatcher=["runs:dispatch"])
    runs = ChamviClient(client, task_queue=task_queue)
    plugin = local_plugin(app)
    api = create_api(tokens=list(tokens.values()), managed=None, runs=runs, events=plugin.runtime.events)
    async with build_worker(client, plugin, task_queue=task_queue), serving(api) as url:
        yield Stack(url, tokens, runs, agent, app, plugin)


@dataclass
class Message:
    """One Server-Sent Event as a browser's EventSource reads it."""

    id: str | None
    event: str
    data: dict[str, Any]


async def sse(response: httpx.Response) -> AsyncIterator[Message]:
    """The events of an SSE response, as they arrive; comments (keep-alives) are skipped."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield Message(fields.get("id"), fields.get("event", "message"), json.loads(fields["data"]))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


async def collect(chamvi: ChamviClient, run_id: str, after: int | None = None) -> list[RunEvent]:
    return [event async for event in chamvi.events(run_id, after)]


async def test_every_event_of_a_run_with_an_approval_arrives_once_and_in_order(
    stack: Stack, chamvi: ChamviClient
) -> None:
    run_id = (await chamvi.dispatch(stack.agent, {"version": "1.2"})).run_id
    seen: list[RunEvent] = []
    async for event in chamvi.events(run_id):
        seen.append(event)
        if event.type == "run.waiting":
            view = await chamvi.get_run(run_id)
            assert view.waiting is not None
            assert event.data["approval_id"] == view.waiting.approval_id
            assert event.data["deadline"] == view.waiting.until.isoformat()
            assert (event.data["title"], event.data["body"], event.data["tool"]) == (
                "Deploy 1.2?",
                "prod, 3 hosts",
                "deploy",
            )
            await chamvi.approvals.approve(run_id, approved=True, reason="go")

    assert [e.type for e in seen] == EXPECTED
    ids = [e.event_id or 0 for e in seen]
    assert ids == sorted(set(ids))
    llm, tool_step, last = (e.data for e in seen if e.type == "run.step")
    assert (llm["step"], llm["kind"], [c["name"] for c in llm["tool_calls"]]) == (0, "llm", ["deploy"])
    assert (tool_step["kind"], tool_step["tool"], tool_step["output"]) == ("tool", "deploy", "deployed 1.2")
    assert (last["step"], last["text"]) == (1, "shipped")
    resumed = seen[3].data
    assert (resumed["approved"], resumed["reason"]) == (True, "go")
    assert seen[-1].data["output"] == "shipped"
    assert all(e.run_id == run_id for e in seen)
    # read again after the end: the same events with the same ids
    assert await collect(chamvi, run_id) == seen


async def test_the_sse_stream_carries_the_same_events_with_their_ids_and_resumes_after_last_event_id(
    stack: Stack, chamvi: ChamviClient
) -> None:
    run_id = (await chamvi.dispatch(stack.agent, {"version": "1.2"})).run_id
    first: list[Message] = []
    async with stack.http() as http:
        async with http.stream("GET", f"/runs/{run_id}/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for message in sse(response):
                first.append(message)
                if message.event == "run.waiting":
                    break  # the client goes away mid-run
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id, approved=True)
        rest: list[Message] = []
        async with http.stream(
            "GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": first[-1].id or ""}
        ) as response:
            assert response.status_code == 200
            rest = [message async for message in sse(response)]
        # an EventSource reconnecting after the last event is told the stream is over
        after_end = await http.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": rest[-1].id or ""})
        assert after_end.status_code == 204
        # a new EventSource (a reloaded page) resumes by the query instead
        reloaded = await http.get(f"/runs/{run_id}/events", params={"last_event_id": first[-1].id})
        assert [
            line.removeprefix("id: ") for line in reloaded.text.splitlines() if line.startswith("id:")
        ] == [m.id for m in rest]

    whole = await collect(chamvi, run_id)
    received = [*first, *rest]
    assert [m.event for m in received] == EXPECTED
    assert [m.id for m in received] == [str(e.event_id) for e in whole]
    assert [m.data for m in received] == [e.as_dict() for e in whole]


async def test_a_client_that_disconnects_costs_the_server_nothing(stack: Stack, chamvi: ChamviClient) -> None:
    run_id = (await chamvi.dispatch(stack.agent, {"version": "1.2"})).run_id
    await until_status(chamvi, run_id, RunStatus.WAITING)
    async with stack.http() as http, http.stream("GET", f"/runs/{run_id}/events") as response:
        async for message in sse(response):
            if message.event == "run.waiting":
                break
        assert stack.runs.open_streams == 1

    async def closed() -> bool | None:
        return True if stack.runs.open_streams == 0 else None

    await eventually(closed, "the server closing the history long-poll of a gone client")
    assert stack.plugin.runtime.events.streams(run_id) == 0  # nor does it keep a queue for its deltas
    await chamvi.cancel(run_id)


async def test_the_event_stream_takes_its_token_as_a_query_parameter_for_browsers(
    stack: Stack, chamvi: ChamviClient
) -> None:
    run_id = (await chamvi.dispatch(stack.agent, {"version": "1.2"})).run_id
    await until_status(chamvi, run_id, RunStatus.WAITING)
    await chamvi.cancel(run_id)
    await until_status(chamvi, run_id, RunStatus.CANCELLED)
    reader, dispatcher = stack.tokens["reader"].value, stack.tokens["dispatcher"].value
    async with stack.http(token=None) as http:
        answered = await http.get(f"/runs/{run_id}/events", params={"token": reader})
        assert answered.status_code == 200
        assert [line for line in answered.text.splitlines() if line.startswith("event:")][-1] == (
            "event: run.cancelled"
        )
        assert (await http.get(f"/runs/{run_id}/events")).status_code == 401
        forbidden = await http.get(f"/runs/{run_id}/events", params={"token": dispatcher})
        assert forbidden.status_code == 403
        # only the event stream takes a token in its query
        assert (await http.get(f"/runs/{run_id}", params={"token": reader})).status_code == 401


async def test_an_unknown_run_or_a_last_event_id_that_is_no_event_id_is_refused_by_name(
    stack: Stack,
) -> None:
    async with stack.http() as http:
        missing = await http.get("/runs/no-such-run/events")
        assert missing.status_code == 404
        assert "no-such-run" in missing.json()["error"]["message"]
        bad = await http.get("/runs/no-such-run/events", headers={"Last-Event-ID": "abc"})
        assert bad.status_code == 422
        assert "Last-Event-ID: 'abc' does not match" in bad.json()["error"]["message"]


async def test_listeners_in_the_worker_process_hear_each_event_of_the_runs_it_started_once(
    chamvi: ChamviClient, running_worker
) -> None:
    models = ModelRegistry()
    models.register(
        "scripted/deployer", ScriptedModel([call("deploy", "call-1", version="2.0"), reply("ok")])
    )
    app = App(
        agents=[
            define_agent(name="deployer", model="scripted/deployer", instructions="Deploy.", tools=[deploy])
        ],
        models=models,
    )
    heard: list[RunEvent] = []
    app.on("*", heard.append)
    async with running_worker(app):
        run_id = (await chamvi.dispatch("deployer", {"version": "2.0"})).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id, approved=False, reason="not today")
        await chamvi.wait(run_id)

        async def ended() -> bool | None:
            return True if heard and heard[-1].final else None

        await eventually(ended, "the listener hearing the run end")

    assert [e.type for e in heard] == EXPECTED
    assert heard == await collect(chamvi, run_id)
    assert (heard[3].data["approved"], heard[3].data["reason"]) == (False, "not today")


@tool
async def hurried_deploy(version: str, ctx: ToolContext) -> str:
    """Deploys if a person approves within a second."""
    decision = await approve(ctx, title=f"Deploy {version}?", timeout=timedelta(seconds=1))
    return "deployed" if decision.approved else f"not deployed: {decision.reason}"


async def test_an_approval_that_times_out_resumes_the_run_denied_whatever_stale_answers_came(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    models = ModelRegistry()
    models.register(
        "scripted/hurried", ScriptedModel([call("hurried_deploy", "c1", version="3.0"), reply("ok")])
    )
    agent = define_agent(
        name="hurried", model="scripted/hurried", instructions="Deploy.", tools=[hurried_deploy]
    )
    async with running_worker(App(agents=[agent], models=models)):
        run_id = (await chamvi.dispatch("hurried", {"version": "3.0"})).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        # a stale answer the run ignores must not read as the decision
        await client.get_workflow_handle(run_id).signal(
            "approve", {"approval_id": "9:old:0", "approved": True}
        )
        await chamvi.wait(run_id)
        events = await collect(chamvi, run_id)

    assert [e.type for e in events] == EXPECTED
    resumed = events[3].data
    assert (resumed["approved"], resumed["reason"], resumed["approver"]) == (
        False,
        "approval timed out",
        None,
    )
    assert events[4].data["output"] == "not deployed: approval timed out"
