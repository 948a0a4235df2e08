"""Agent state on a real Temporal dev server and Qdrant local mode: runs remember, twenty writers
lose nothing, the schema and the tool policy hold, a timed-out effect finds its write in ``ctx.state``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel
from qdrant_client import AsyncQdrantClient
from temporalio.client import Client

from chamvi import (
    ActivityTimeouts,
    App,
    ChamviClient,
    RunStatus,
    ToolContext,
    build_worker,
    define_agent,
    effect_tool,
    tool,
)
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from chamvi.state import AgentState, StateStore
from tests.polling import until_status


class Refund(BaseModel):
    customer: str
    order_id: str
    amount: float


def _app(agent: str, turns: list, **agent_options: object) -> App:
    models = ModelRegistry()
    models.register(f"scripted/{agent}", ScriptedModel(turns))
    return App(
        agents=[
            define_agent(
                name=agent,
                model=f"scripted/{agent}",
                instructions="Remember refunds.",
                state=AgentState(collections={"refunds": Refund}),
                **agent_options,  # type: ignore[arg-type]
            )
        ],
        models=models,
    )


@asynccontextmanager
async def _worker_on_disk(client: Client, app: App, task_queue: str, folder: Path) -> AsyncIterator[None]:
    """A worker with its own Qdrant client in local mode on disk, closed when it stops."""
    qdrant = AsyncQdrantClient(path=str(folder))
    try:
        async with build_worker(client, app, task_queue=task_queue, index=KnowledgeIndex(qdrant)):
            yield
    finally:
        await qdrant.close()


async def test_state_written_by_one_run_is_read_by_the_next_run_on_another_worker(
    client: Client, chamvi: ChamviClient, task_queue: str, tmp_path: Path
) -> None:
    refund = {"customer": "ada@example.com", "order_id": "A-1001", "amount": 25.0}
    writer = _app("remember", [call("state_refunds_upsert", key="A-1001", item=refund), reply("noted")])
    reader = _app("remember", [call("state_refunds_list"), reply("read")])
    folder = tmp_path / "qdrant"

    async with _worker_on_disk(client, writer, task_queue, folder):
        first = await chamvi.wait((await chamvi.dispatch("remember")).run_id)
    assert first.status == RunStatus.COMPLETED, first.error
    assert first.steps[1].output == {"key": "A-1001", "item": refund, "stored": True}

    async with _worker_on_disk(client, reader, task_queue, folder):  # a new process's view of the folder
        second = await chamvi.wait((await chamvi.dispatch("remember")).run_id)
    assert second.status == RunStatus.COMPLETED, second.error
    listed = second.steps[1].output
    assert [(i["key"], i["value"]) for i in listed["items"]] == [("A-1001", refund)]
    assert listed["next_offset"] is None


async def test_twenty_parallel_upserting_runs_lose_no_write(
    chamvi: ChamviClient, running_worker, tmp_path: Path, client: Client, task_queue: str
) -> None:
    def upsert_own_key(request: ChatRequest) -> ScriptedTurn:
        item = {"customer": request.run_id, "order_id": request.run_id, "amount": 1.0}
        return call("state_refunds_upsert", key=request.run_id, item=item)

    app = _app("many", [upsert_own_key, reply("stored")])
    qdrant = AsyncQdrantClient(path=str(tmp_path / "qdrant"))
    try:
        async with build_worker(client, app, task_queue=task_queue, index=KnowledgeIndex(qdrant)):
            run_ids = [(await chamvi.dispatch("many")).run_id for _ in range(20)]
            runs = await asyncio.gather(*(chamvi.wait(r) for r in run_ids))
        assert [r.status for r in runs] == [RunStatus.COMPLETED] * 20
        store = StateStore(qdrant)
        page = await store.page("many", "refunds", limit=100)
        assert sorted(i.key for i in page.items) == sorted(run_ids)
        assert await store.count("many", "refunds") == 20
    finally:
        await qdrant.close()


async def test_an_invalid_upsert_is_a_tool_error_naming_the_field_and_the_run_goes_on(
    chamvi: ChamviClient, running_worker
) -> None:
    bad = {"customer": "ada@example.com", "order_id": "A-1", "amount": "a lot"}
    turns = [call("state_refunds_upsert", key="A-1", item=bad), call("state_refunds_list"), reply("ok")]
    app = _app("strict", turns)
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("strict")).run_id)
    assert run.status == RunStatus.COMPLETED
    upsert = run.steps[1]
    assert upsert.error is not None and upsert.error.code == "validation_error"
    assert "item.amount" in upsert.error.message
    assert [issue.path for issue in upsert.error.issues or []] == [("item", "amount")]
    assert run.steps[3].output == {"items": [], "next_offset": None}  # nothing was stored


async def test_a_tool_validates_an_upsert_through_ctx_state_naming_the_field(
    chamvi: ChamviClient, running_worker
) -> None:
    @tool
    async def record(amount: str, ctx: ToolContext) -> str:
        """Records a refund of `amount` through the agent's state."""
        item = {"customer": "c", "order_id": "A-2", "amount": amount}
        await ctx.state.collection("refunds").upsert("A-2", item)
        return "recorded"

    app = _app("typed", [call("record", amount="twelve"), reply("ok")], tools=[record])
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("typed")).run_id)
    error = run.steps[1].error
    assert error is not None and error.code == "validation_error"
    assert error.message.startswith("invalid item for state collection 'refunds': amount: ")


async def test_the_tool_policy_covers_state_tools(chamvi: ChamviClient, running_worker) -> None:
    app = _app(
        "guarded",
        [call("state_refunds_remove", key="A-1"), reply("refused")],
        tool_policy=lambda name, run: name != "state_refunds_remove",
    )
    async with running_worker(app):
        spec = app.spec("guarded")
        run = await chamvi.wait((await chamvi.dispatch("guarded")).run_id)
    assert {t.name for t in spec.tools} == {f"state_refunds_{op}" for op in ("list", "upsert", "remove")}
    error = run.steps[1].error
    assert error is not None and error.code == "tool_not_allowed"


async def test_key_value_state_keeps_falsy_values_and_effect_hooks_read_it_after_a_timed_out_call(
    chamvi: ChamviClient, running_worker
) -> None:
    attempts: list[str] = []

    async def noted(key: str, _input: object, ctx: ToolContext) -> str | None:
        return "found in state" if await ctx.state.get(f"applied:{key}") is not None else None

    def keyed(_args: object, ctx: ToolContext) -> str:
        return f"{ctx.run.run_id}:{ctx.state.agent}:charge"

    @effect_tool(already_applied=noted, effect_key=keyed)
    async def charge(amount: int, ctx: ToolContext) -> str:
        """Charges once; the first attempt writes its mark, then outlives its timeout."""
        attempts.append(ctx.effect_key or "")
        await ctx.state.set(f"applied:{ctx.effect_key}", 0)  # 0 is a value, not an absence
        await ctx.state.set("flag", False)
        if len(attempts) == 1:
            await asyncio.sleep(30)
        return "charged"

    @tool
    async def read_flag(ctx: ToolContext) -> list[object]:
        """Reads the flag and a key never set."""
        return [await ctx.state.get("flag", "missing"), await ctx.state.get("never", "missing")]

    models = ModelRegistry()
    turns = [call("charge", amount=3), call("read_flag"), reply("done")]
    models.register("scripted/kv", ScriptedModel(turns))
    app = App(
        agents=[
            define_agent(name="kv", model="scripted/kv", instructions="Charge.", tools=[charge, read_flag])
        ],
        models=models,
        timeouts=ActivityTimeouts(tool=timedelta(seconds=2), tool_heartbeat=timedelta(seconds=2)),
    )
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("kv")).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(attempts) == 1  # the retried call never ran the function again
    assert attempts[0] == f"{run.run_id}:kv:charge"  # effect_key read ctx.state too
    assert run.steps[1].output == "found in state"
    assert run.steps[3].output == [False, "missing"]


async def test_a_listing_asks_a_worker_through_a_short_workflow(
    chamvi: ChamviClient, running_worker, client: Client, task_queue: str
) -> None:
    refund = {"customer": "grace@example.com", "order_id": "A-1002", "amount": 80.0}
    app = _app("lister", [call("state_refunds_upsert", key="A-1002", item=refund), reply("noted")])
    async with running_worker(app):
        await until_status(chamvi, (await chamvi.dispatch("lister")).run_id, RunStatus.COMPLETED)
        listing = await chamvi.state.list("lister", "refunds")
        overview = await chamvi.state.list("lister")
    assert [(i.key, i.value) for i in listing.page.items] == [("A-1002", refund)]
    assert overview.collections == {"refunds": 1}
    assert overview.page.items == []


async def test_the_support_example_remembers_each_customers_past_refunds(
    chamvi: ChamviClient, running_worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.support.app import app as support_app

    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))  # the example's outbox
    payload = {"order_id": "A-1001", "amount": 25, "to": "ada@example.com", "body": "Refunded."}
    async with running_worker(support_app):
        first = (await chamvi.dispatch("support", payload)).run_id
        await until_status(chamvi, first, RunStatus.WAITING)
        await chamvi.approvals.approve(first, approved=True)
        assert (await chamvi.wait(first)).status == RunStatus.COMPLETED
        second = (await chamvi.dispatch("support", {"order_id": "A-1001"})).run_id
        run = await chamvi.wait(second)
        listing = await chamvi.state.list("support", "refunds")
    lookup = next(s for s in run.steps if s.tool == "lookup_order")
    assert lookup.output["past_refunds"] == [{"order_id": "A-1001", "amount": 25.0, "run_id": first}]
    assert [(i.key, i.value["customer"]) for i in listing.page.items] == [("A-1001", "ada@example.com")]
