"""Agents defined at runtime: put through the client, run on a worker, pinned to their revision.

A run keeps the revision it started with across a later put, a worker restart, a retried call and
a resumed approval; a remove refuses new runs while the run under way finishes on its revision.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, ScheduleBackfill

from chamvi import App, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi._constants import SCHEDULE_ID_PREFIX
from chamvi.artifacts import ArtifactStore
from chamvi.errors import (
    AgentNotFoundError,
    ChamviValidationError,
    ConflictError,
    ProviderUnavailableError,
)
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from chamvi.runtime import build_worker
from tests.conftest import RunningWorker
from tests.polling import eventually, until_status
from tests.support.cli import cli_on
from tests.support.names import unique

deployed: list[str] = []


@tool
async def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"order {order_id} shipped"


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys a version once a person approves."""
    decision = await approve(ctx, title=f"Deploy {version}?")
    deployed.append(version)
    return "deployed" if decision.approved else "not deployed"


DEPLOYER = {"model": "scripted/one", "instructions": "One.", "tools": ["deploy"]}


@tool
async def remember(note: str, ctx: ToolContext) -> str:
    """Remembers a note in the agent's key-value state."""
    await ctx.state.set("note", note)
    return "noted"


def make_app(models: ModelRegistry) -> App:
    code = define_agent(name="support", model="local/demo", instructions="Support.")
    return App(agents=[code], models=models, runtime_tools=[lookup, deploy, remember])


def instructions_seen(model: ScriptedModel) -> list[str | None]:
    return [request.messages[0].content for request in model.requests]


def tools_seen(model: ScriptedModel) -> list[list[str]]:
    return [[t.name for t in request.tools] for request in model.requests]


async def test_a_runtime_agent_put_through_the_client_runs_on_a_worker(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    models = ModelRegistry()
    model = ScriptedModel([call("lookup", order_id="A1"), reply("A1 shipped")])
    models.register("scripted/triage", model)
    async with running_worker(make_app(models)):
        put = await chamvi.agents.put(
            "triage",
            {"model": "scripted/triage", "instructions": "Triage.", "tools": ["lookup"], "description": "T"},
        )
        run = await chamvi.wait((await chamvi.dispatch("triage", {"order": "A1"})).run_id)
        listed = [(a.name, a.kind, a.revision) for a in await chamvi.agents.list()]
        shown = await chamvi.agents.get("triage")
    assert (put.agent.revision, put.created) == (1, True)
    assert (run.status, run.output, run.agent_revision) == (RunStatus.COMPLETED, "A1 shipped", 1)
    assert [s.output for s in run.steps if s.kind == "tool"] == ["order A1 shipped"]
    assert instructions_seen(model) == ["Triage.", "Triage."] and tools_seen(model)[0] == ["lookup"]
    assert listed == [("support", "code", None), ("triage", "runtime", 1)]
    assert shown.definition is not None and shown.definition.tools == ["lookup"]


async def test_a_worker_refuses_an_invalid_put_naming_each_field(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    async with running_worker(make_app(ModelRegistry())):
        with pytest.raises(ChamviValidationError) as refused:
            await chamvi.agents.put(
                "triage", {"instructions": "x", "tools": ["rm_rf"], "budget": {"max_steps": 0}}
            )
        with pytest.raises(ConflictError, match="defined in code"):
            await chamvi.agents.put("support", {"instructions": "x"})
        with pytest.raises(AgentNotFoundError):
            await chamvi.agents.remove("triage")
        with pytest.raises(AgentNotFoundError):
            await chamvi.agents.get("triage")
    paths = sorted(".".join(map(str, issue.path)) for issue in refused.value.issues)
    assert paths == ["budget.max_steps"]  # the fields are checked before the App is asked
    assert refused.value.issues[0].code == "greater_than_equal"


async def test_a_run_keeps_its_revision_across_a_put_a_worker_restart_and_an_approval(
    client: Client, task_queue: str, chamvi: ChamviClient
) -> None:
    deployed.clear()
    models = ModelRegistry()
    one = ScriptedModel([call("deploy", "c1", version="1.0"), reply("deployed 1.0")], repeat_last=True)
    two = ScriptedModel([reply("revision two")], repeat_last=True)
    models.register("scripted/one", one)
    models.register("scripted/two", two)
    app = make_app(models)
    store = ArtifactStore.memory()  # shared by both workers, as a deployment's folder or bucket is
    async with build_worker(client, app, task_queue=task_queue, artifacts=store):
        await chamvi.agents.put(
            "deployer", {"model": "scripted/one", "instructions": "One.", "tools": ["deploy"]}
        )
        first = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, first, RunStatus.WAITING)
        put = await chamvi.agents.put(
            "deployer", {"model": "scripted/two", "instructions": "Two.", "tools": ["lookup"]}
        )
    assert put.agent.revision == 2
    async with build_worker(client, app, task_queue=task_queue, artifacts=store):  # a restarted worker
        await chamvi.approvals.approve(first, approved=True)
        run = await chamvi.wait(first)
        second = await chamvi.wait((await chamvi.dispatch("deployer")).run_id)
    assert (run.status, run.output, run.agent_revision) == (RunStatus.COMPLETED, "deployed 1.0", 1)
    assert deployed == ["1.0"]  # the approved call ran revision 1's tool on the new worker
    assert instructions_seen(one) == ["One.", "One."] and tools_seen(one) == [["deploy"], ["deploy"]]
    assert (second.output, second.agent_revision) == ("revision two", 2)
    assert instructions_seen(two) == ["Two."] and tools_seen(two) == [["lookup"]]


async def test_a_retried_model_call_keeps_the_runs_revision_after_a_put(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    failed = asyncio.Event()

    def flaky(request: ChatRequest) -> ScriptedTurn:
        if not failed.is_set():
            failed.set()
            raise ProviderUnavailableError("the provider is overloaded")
        return reply("answered")

    models = ModelRegistry()
    one, two = ScriptedModel([flaky]), ScriptedModel([reply("revision two")])
    models.register("scripted/one", one)
    models.register("scripted/two", two)
    async with running_worker(make_app(models)):
        await chamvi.agents.put("flaky", {"model": "scripted/one", "instructions": "One."})
        run_id = (await chamvi.dispatch("flaky")).run_id
        await asyncio.wait_for(failed.wait(), timeout=30)
        await chamvi.agents.put("flaky", {"model": "scripted/two", "instructions": "Two."})
        run = await chamvi.wait(run_id)
    assert (run.status, run.output, run.agent_revision) == (RunStatus.COMPLETED, "answered", 1)
    assert instructions_seen(one) == ["One.", "One."] and two.requests == []


async def test_a_removed_agent_refuses_new_runs_while_its_run_finishes(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    deployed.clear()
    models = ModelRegistry()
    models.register("scripted/one", ScriptedModel([call("deploy", "c1", version="2.0"), reply("ok")] * 2))
    async with running_worker(make_app(models)):
        await chamvi.agents.put(
            "deployer", {"model": "scripted/one", "instructions": "One.", "tools": ["deploy"]}
        )
        going = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, going, RunStatus.WAITING)
        assert await chamvi.agents.remove("deployer") == 2
        with pytest.raises(AgentNotFoundError, match="was removed"):
            await chamvi.agents.check("deployer")
        refused = await chamvi.wait((await chamvi.dispatch("deployer")).run_id)
        await chamvi.approvals.approve(going, approved=True)
        finished = await chamvi.wait(going)
        names = [a.name for a in await chamvi.agents.list()]
    assert (refused.status, refused.error and refused.error.code) == (RunStatus.FAILED, "agent_not_found")
    assert (finished.status, finished.agent_revision, deployed) == (RunStatus.COMPLETED, 1, ["2.0"])
    assert names == ["support"]


async def test_a_schedule_fires_runs_of_a_runtime_agent(
    client: Client, chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    models = ModelRegistry()
    models.register("scripted/digest", ScriptedModel([reply("digest sent")], repeat_last=True))
    # Other tests run agents named "digest" too, and run lists span the namespace.
    agent = unique("digest")
    async with running_worker(make_app(models)):
        await chamvi.agents.put(agent, {"model": "scripted/digest", "instructions": "Digest."})
        schedule = f"{agent}-yearly"
        await chamvi.schedules.create(agent, cron="0 0 1 1 *", id=schedule)
        try:
            fire = datetime(2026, 1, 1, tzinfo=UTC)
            await client.get_schedule_handle(SCHEDULE_ID_PREFIX + schedule).backfill(
                ScheduleBackfill(start_at=fire - timedelta(minutes=1), end_at=fire + timedelta(minutes=1))
            )

            async def completed() -> Any:
                runs = await chamvi.list_runs(agent=agent, status="completed")
                return runs or None

            runs = await eventually(completed, "the scheduled run of the runtime agent")
            run = await chamvi.get_run(runs[0].run_id)
        finally:
            await chamvi.schedules.delete(schedule)
    assert (run.trigger.trigger, run.agent_revision) == ("schedule", 1)


async def test_the_cli_puts_lists_shows_and_removes_a_runtime_agent(
    client: Client, task_queue: str, chamvi: ChamviClient, running_worker: RunningWorker, tmp_path: Path
) -> None:
    models = ModelRegistry()
    models.register("scripted/triage", ScriptedModel([reply("done")], repeat_last=True))
    cli = cli_on(client, task_queue)
    yaml_file = tmp_path / "triage.yaml"
    yaml_file.write_text(
        "name: triage\nmodel: scripted/triage\ninstructions: Triage.\ntools: [lookup]\n"
        "budget: {max_steps: 5}\n"
    )
    json_file = tmp_path / "triage.json"
    json_file.write_text(
        json.dumps({"instructions": "Triage twice.", "tools": ["lookup"], "model": "scripted/triage"})
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instructions": "x", "tools": ["rm_rf"]}))
    async with running_worker(make_app(models)):
        created = await cli("agents", "put", str(yaml_file))
        unchanged = await cli("agents", "put", str(yaml_file))
        updated = await cli("agents", "put", str(json_file), "--name", "triage")
        refused = await cli("agents", "put", str(bad), "--name", "triage")
        nameless = await cli("agents", "put", str(bad))
        listed = await cli("agents", "list")
        shown = await cli("agents", "show", "triage", "--revision", "1", "--json")
        run = await chamvi.wait((await chamvi.dispatch("triage")).run_id)
        removed = await cli("agents", "rm", "triage")
        gone = await cli("agents", "rm", "triage")
    assert (created.exit_code, created.stdout.strip()) == (0, "created agent triage at revision 1")
    assert unchanged.stdout.strip() == "agent triage is unchanged at revision 1"
    assert updated.stdout.strip() == "updated agent triage at revision 2"
    assert (
        refused.exit_code == 1
        and "tools.0: tool 'rm_rf' is not among the App's runtime tools" in refused.output
    )
    assert nameless.exit_code == 1 and "names no agent" in nameless.output
    assert [line.split()[:3] for line in listed.stdout.splitlines()] == [
        ["AGENT", "KIND", "REVISION"],
        ["support", "code", "-"],
        ["triage", "runtime", "2"],
    ]
    assert json.loads(shown.stdout)["definition"]["budget"]["max_steps"] == 5
    assert run.agent_revision == 2
    assert removed.stdout.strip().startswith("removed agent triage (revision 3)")
    assert gone.exit_code == 1 and "was removed (revision 3)" in gone.output


async def test_a_runtime_agents_key_value_state_is_listed_like_any_agents(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    models = ModelRegistry()
    models.register("scripted/notes", ScriptedModel([call("remember", note="call back"), reply("ok")]))
    async with running_worker(make_app(models)):
        await chamvi.agents.put(
            "notes", {"model": "scripted/notes", "instructions": "x", "tools": ["remember"]}
        )
        run = await chamvi.wait((await chamvi.dispatch("notes")).run_id)
        listing = await chamvi.state.list("notes")
    assert run.status == RunStatus.COMPLETED
    assert [(item.key, item.value) for item in listing.page.items] == [("note", "call back")]
    assert listing.collections == {}


async def test_a_conversation_with_a_runtime_agent_recalls_its_turns_each_on_the_latest_revision(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    from tests.apps.chat import answer

    models = ModelRegistry()
    models.register("scripted/chat", ScriptedModel([answer], repeat_last=True))
    name = unique("helper")
    async with running_worker(make_app(models)):
        await chamvi.agents.put(name, {"model": "scripted/chat", "instructions": "Help."})
        first = await chamvi.conversations.send(name, "Can I get a refund?")
        before = await chamvi.conversations.wait_turn(first)
        await chamvi.agents.put(name, {"model": "scripted/chat", "instructions": "Help, briefly."})
        second = await chamvi.conversations.send(name, "and how long?", conversation=first.conversation)
        after = await chamvi.conversations.wait_turn(second)
        await chamvi.agents.remove(name)
        third = await chamvi.conversations.send(name, "still there?", conversation=first.conversation)
        gone = await chamvi.conversations.wait_turn(third)
        with pytest.raises(AgentNotFoundError, match="was removed"):
            await chamvi.conversations.send(name, "hello", conversation="a-new-one")
    assert (before.status, before.agent_revision) == (RunStatus.COMPLETED, 1)
    assert (after.output, after.agent_revision) == ("re: and how long? | earlier: ['Can I get a refund?']", 2)
    assert after.conversation is not None and after.conversation.turn == 1
    # the conversation lives on its workflow: the turn of a removed agent fails as its run, recorded
    assert (gone.status, gone.error and gone.error.code) == (RunStatus.FAILED, "agent_not_found")
