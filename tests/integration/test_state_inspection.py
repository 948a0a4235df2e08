"""Reading agent state from outside a run: `chamvi state list` through a worker, `/state` over HTTP."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from pydantic import BaseModel
from temporalio.client import Client

from chamvi import AgentState, App, ChamviClient, RunStatus, ToolContext, define_agent, tool
from chamvi._lifecycle import memory_index
from chamvi.errors import UnavailableError
from chamvi.http import build_api
from chamvi.plugin import ChamviPlugin
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from tests.support.cli import cli_on
from tests.support.http_api import bearer, make_tokens, serving


class Refund(BaseModel):
    customer: str
    amount: float


@tool
async def remember_customer(customer: str, ctx: ToolContext) -> str:
    """Keeps the last customer in the key-value space."""
    await ctx.state.set("last_customer", customer)
    return "kept"


def _app() -> App:
    models = ModelRegistry()
    turns = [
        call("state_refunds_upsert", key="A-1", item={"customer": "ada@example.com", "amount": 25}),
        call("state_refunds_upsert", key="A-2", item={"customer": "grace@example.com", "amount": 80}),
        call("remember_customer", customer="grace@example.com"),
        reply("noted"),
    ]
    models.register("scripted/keeper", ScriptedModel(turns))
    keeper = define_agent(
        name="keeper",
        model="scripted/keeper",
        instructions="Keep refunds.",
        tools=[remember_customer],
        state=AgentState(collections={"refunds": Refund}),
    )
    return App(agents=[keeper], models=models)


async def test_state_list_prints_a_collection_newest_first_and_the_agent_overview(
    client: Client, chamvi: ChamviClient, task_queue: str, running_worker
) -> None:
    chamvi_cli = cli_on(client, task_queue)
    async with running_worker(_app()):
        run = await chamvi.wait((await chamvi.dispatch("keeper")).run_id)
        assert run.status == RunStatus.COMPLETED, run.error
        refunds = await chamvi_cli("state", "list", "keeper", "refunds")
        paged = await chamvi_cli("state", "list", "keeper", "refunds", "--limit", "1", "--json")
        overview = await chamvi_cli("state", "list", "keeper")
        unknown = await chamvi_cli("state", "list", "keeper", "refnds")
        nosuch = await chamvi_cli("state", "list", "nosuch")

    assert refunds.exit_code == 0, refunds.output
    lines = refunds.stdout.splitlines()
    assert lines[0].split() == ["KEY", "WRITTEN", "VALUE"]
    assert [line.split()[0] for line in lines[1:]] == ["A-2", "A-1"]  # the latest write first
    assert '{"customer": "ada@example.com", "amount": 25.0}' in lines[2]

    page = json.loads(paged.stdout)
    assert [i["key"] for i in page["page"]["items"]] == ["A-2"]
    assert page["page"]["next_offset"] == 1

    assert overview.exit_code == 0, overview.output
    assert overview.stdout.splitlines()[0] == "refunds  2 items"
    assert "last_customer" in overview.stdout and "grace@example.com" in overview.stdout

    assert unknown.exit_code == 1
    assert "unknown state collection 'refnds' of agent 'keeper': declared collections are 'refunds'" in (
        unknown.output
    )
    assert nosuch.exit_code == 1 and "unknown agent 'nosuch'" in nosuch.output


async def test_state_list_without_a_worker_says_so_in_one_line(client: Client, task_queue: str) -> None:
    chamvi = ChamviClient(client, task_queue=task_queue)
    with pytest.raises(UnavailableError, match=f"no worker answered on task queue {task_queue!r}"):
        await chamvi.state.list("keeper", timeout=timedelta(seconds=1))


async def test_the_state_routes_need_state_read_and_page_a_collection(
    client: Client, chamvi: ChamviClient, task_queue: str
) -> None:
    app = _app()
    index = memory_index()
    tokens = make_tokens(reader=["state:read"], runs=["runs:*"])
    plugin = ChamviPlugin(app, index=index, start_collections=False)
    api = build_api(app, client, index, tokens=list(tokens.values()), task_queue=task_queue)
    async with build_worker(client, plugin, task_queue=task_queue), serving(api) as url:
        await chamvi.wait((await chamvi.dispatch("keeper")).run_id)
        async with httpx.AsyncClient(base_url=url, headers=bearer(tokens["reader"])) as http:
            page = await http.get("/state/keeper/refunds", params={"limit": 1, "offset": 1})
            overview = await http.get("/state/keeper")
            unknown = await http.get("/state/keeper/refnds")
            bad_name = await http.get("/state/Keeper")
        async with httpx.AsyncClient(base_url=url, headers=bearer(tokens["runs"])) as http:
            refused = await http.get("/state/keeper")

    assert page.status_code == 200, page.text
    assert [i["key"] for i in page.json()["page"]["items"]] == ["A-1"]
    assert page.json()["page"]["next_offset"] is None
    assert overview.json()["collections"] == {"refunds": 2}
    assert [i["key"] for i in overview.json()["page"]["items"]] == ["last_customer"]
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert bad_name.status_code == 422
    assert refused.status_code == 403
