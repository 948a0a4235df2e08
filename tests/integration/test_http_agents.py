"""``/agents`` over HTTP: put, list, show and remove agents defined at runtime, and dispatch them."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from temporalio.client import Client

from chamvi import App, ChamviClient, ChamviPlugin, RunStatus, define_agent, tool
from chamvi._lifecycle import memory_index
from chamvi.artifacts import ArtifactStore
from chamvi.http import build_api, create_api
from chamvi.http.auth import Token
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker, local_plugin
from tests.support.http_api import bearer, make_tokens, runs_api, serving
from tests.support.names import unique


@tool
async def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"order {order_id} shipped"


def make_app() -> App:
    models = ModelRegistry()
    models.register("scripted/triage", ScriptedModel([call("lookup", order_id="A1"), reply("ok")] * 4))
    code = define_agent(name="support", model="scripted/triage", instructions="Support.")
    return App(agents=[code], models=models, runtime_tools=[lookup])


TRIAGE: dict[str, Any] = {"model": "scripted/triage", "instructions": "Triage.", "tools": ["lookup"]}
TOKENS = make_tokens(
    writer=["agents:write", "agents:read", "runs:dispatch", "runs:read"], reader=["agents:read"]
)


def _api(runs: ChamviClient, plugin: ChamviPlugin, tokens: dict[str, Token]) -> FastAPI:
    """The API of the workers' process: the App's agents, and the runtime ones from the plugin's store."""
    return create_api(
        tokens=list(tokens.values()),
        managed=None,
        runs=runs,
        agents=list(plugin.app.agents),
        agent_directory=plugin.runtime.agents,
    )


async def test_put_list_show_dispatch_and_remove_an_agent_over_http(client: Client, task_queue: str) -> None:
    app = make_app()
    plugin = local_plugin(app)
    runs = ChamviClient(client, task_queue=task_queue)
    api = _api(runs, plugin, TOKENS)
    writer, reader = bearer(TOKENS["writer"]), bearer(TOKENS["reader"])
    async with (
        build_worker(client, plugin, task_queue=task_queue),
        serving(api) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        created = await http.put("/agents/triage", json=TRIAGE, headers=writer)
        changed = await http.put("/agents/triage", json={**TRIAGE, "description": "T"}, headers=writer)
        same = await http.put("/agents/triage", json={**TRIAGE, "description": "T"}, headers=writer)
        refused = await http.put("/agents/triage", json=TRIAGE, headers=reader)
        in_code = await http.put("/agents/support", json=TRIAGE, headers=writer)
        listed = await http.get("/agents", headers=reader)
        shown = await http.get("/agents/triage", headers=reader)
        first = await http.get("/agents/triage", params={"revision": 1}, headers=reader)
        dispatched = await http.post("/runs", json={"agent": "triage"}, headers=writer)
        run = await runs.wait(dispatched.json()["run_id"])
        removed = await http.delete("/agents/triage", headers=writer)
        gone = await http.post("/runs", json={"agent": "triage"}, headers=writer)
        again = await http.delete("/agents/triage", headers=writer)
    assert (created.status_code, created.json()["agent"]["revision"], created.json()["created"]) == (
        201,
        1,
        True,
    )
    assert (changed.status_code, changed.json()["agent"]["revision"]) == (200, 2)
    assert (same.status_code, same.json()["agent"]["revision"], same.json()["changed"]) == (200, 2, False)
    assert refused.status_code == 403 and "'agents:write'" in refused.json()["error"]["message"]
    assert (in_code.status_code, in_code.json()["error"]["code"]) == (409, "conflict")
    assert [(a["name"], a["kind"], a.get("revision")) for a in listed.json()["data"]] == [
        ("support", "code", None),
        ("triage", "runtime", 2),
    ]
    assert shown.json()["definition"]["description"] == "T" and shown.json()["by"]["id"] == "writer"
    assert "description" not in first.json()["definition"]
    assert (dispatched.status_code, run.status, run.agent_revision) == (202, RunStatus.COMPLETED, 2)
    assert removed.json() == {"name": "triage", "removed_revision": 3}
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "agent_not_found")
    assert again.status_code == 404


async def test_an_invalid_put_answers_422_with_each_field_under_body(client: Client, task_queue: str) -> None:
    app = make_app()
    plugin = local_plugin(app)
    api = create_api(
        tokens=list(TOKENS.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue),
        agent_directory=plugin.runtime.agents,
    )
    writer = bearer(TOKENS["writer"])
    async with serving(api) as url, httpx.AsyncClient(base_url=url) as http:
        unknown = await http.put("/agents/triage", json={**TRIAGE, "tools": ["rm_rf"]}, headers=writer)
        bounds = await http.put(
            "/agents/triage", json={**TRIAGE, "budget": {"max_steps": 0}, "hooks": {}}, headers=writer
        )
        bad_name = await http.put("/agents/Triage_Bot", json=TRIAGE, headers=writer)
        bad_role = await http.put(
            "/agents/triage",
            json={**TRIAGE, "instructions": [{"role": "tool", "content": "x"}]},
            headers=writer,
        )
    assert unknown.status_code == 422
    assert [(i["path"], i["code"]) for i in unknown.json()["error"]["issues"]] == [
        (["body", "tools", 0], "unknown_tool")
    ]
    assert bounds.status_code == 422
    assert sorted(tuple(i["path"]) for i in bounds.json()["error"]["issues"]) == [
        ("body", "budget", "max_steps"),
        ("body", "hooks"),
    ]
    assert bad_name.status_code == 422 and bad_name.json()["error"]["issues"][0]["path"] == ["path", "name"]
    assert [(i["path"], i["code"]) for i in bad_role.json()["error"]["issues"]] == [
        (["body", "instructions", 0, "role"], "literal_error")
    ]


async def test_a_put_over_the_api_of_another_process_reaches_the_workers(
    client: Client, task_queue: str
) -> None:
    store = ArtifactStore.memory()  # the folder or bucket the API and the workers share
    app = make_app()
    api = build_api(
        app, client, memory_index(), tokens=list(TOKENS.values()), task_queue=task_queue, artifacts=store
    )
    writer = bearer(TOKENS["writer"])
    runs = ChamviClient(client, task_queue=task_queue)
    async with (
        build_worker(client, app, task_queue=task_queue, artifacts=store),
        serving(api) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        put = await http.put("/agents/triage", json=TRIAGE, headers=writer)
        dispatched = await http.post("/runs", json={"agent": "triage"}, headers=writer)
        run = await runs.wait(dispatched.json()["run_id"])
        listed = await runs.agents.list()  # the worker's own view of the store
    assert put.status_code == 201
    assert (run.status, run.agent_revision) == (RunStatus.COMPLETED, 1)
    assert [a.name for a in listed] == ["support", "triage"]


async def test_without_the_store_the_routes_ask_the_workers(
    client: Client, task_queue: str, running_worker: Any
) -> None:
    api = runs_api(TOKENS, client, task_queue)
    writer = bearer(TOKENS["writer"])
    async with running_worker(make_app()), serving(api) as url, httpx.AsyncClient(base_url=url) as http:
        put = await http.put("/agents/triage", json=TRIAGE, headers=writer)
        unknown = await http.put("/agents/triage", json={**TRIAGE, "tools": ["rm_rf"]}, headers=writer)
        listed = await http.get("/agents", headers=writer)
    assert (put.status_code, put.json()["agent"]["revision"]) == (201, 1)
    assert [(i["path"], i["code"]) for i in unknown.json()["error"]["issues"]] == [
        (["body", "tools", 0], "unknown_tool")
    ]
    assert [a["name"] for a in listed.json()["data"]] == ["support", "triage"]


async def test_a_runtime_agent_is_talked_with_over_http_and_listed_for_the_chat_view(
    client: Client, task_queue: str
) -> None:
    app = make_app()
    app.models.register("scripted/talk", ScriptedModel([reply("hi")], repeat_last=True))
    plugin = local_plugin(app)
    runs = ChamviClient(client, task_queue=task_queue)
    tokens = make_tokens(talker=["agents:write", "conversations:write", "conversations:read"])
    api = _api(runs, plugin, tokens)
    talker = bearer(tokens["talker"])
    async with (
        build_worker(client, plugin, task_queue=task_queue),
        serving(api) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        await http.put(
            "/agents/talk", json={"model": "scripted/talk", "instructions": "Talk."}, headers=talker
        )
        listed = await http.get("/conversations", headers=talker)
        path = f"/conversations/talk/{unique('c')}/messages"
        sent = await http.post(path, json={"text": "hello"}, headers=talker)
        run = await runs.wait(sent.json()["run_id"])
        unknown = await http.post("/conversations/nosuch/c1/messages", json={"text": "hi"}, headers=talker)
    assert listed.json()["agents"] == ["support", "talk"]
    assert (sent.status_code, run.status, run.output, run.agent_revision) == (
        202,
        RunStatus.COMPLETED,
        "hi",
        1,
    )
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "agent_not_found")
