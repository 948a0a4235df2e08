"""Skills in runs: a model that loads a skill and follows it, and a run that keeps its version."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi._constants import QUERY_TRANSCRIPT, TOOL_SKILL_LOAD
from chamvi.artifacts import ArtifactStore
from chamvi.models import Message, TranscriptQuery
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from chamvi.runtime import build_worker, local_plugin
from chamvi.skills import skill, skills_folder
from tests.polling import until_status

PROCEDURE = """---
name: refund-procedure
description: How to refund an order under refund policy {policy}. Load it before any refund.
---
Refund the order with refund_order, for amount {amount} exactly, then say "refunded".
"""

refunds: list[tuple[str, float]] = []


@tool
async def refund_order(order_id: str, amount: float, ctx: ToolContext) -> str:
    """Refunds an amount on an order, once a person approves."""
    decision = await approve(ctx, title=f"Refund {amount} on {order_id}?")
    if not decision.approved:
        return "not refunded"
    refunds.append((order_id, amount))
    return f"refunded {amount} on {order_id}"


def write_procedure(folder: Path, amount: str, policy: str = "v1") -> Path:
    (folder / "refund-procedure").mkdir(parents=True, exist_ok=True)
    (folder / "refund-procedure" / "SKILL.md").write_text(PROCEDURE.format(amount=amount, policy=policy))
    return folder


def followed(request: ChatRequest) -> ScriptedTurn:
    """Calls refund_order with the amount the loaded skill names: the model follows the skill."""
    loaded = next(m for m in reversed(request.messages) if m.role == "tool" and m.name == TOOL_SKILL_LOAD)
    instructions = json.loads(loaded.content or "{}")["instructions"]
    amount = re.search(r"for amount ([0-9.]+) exactly", instructions)
    assert amount is not None, instructions
    return call("refund_order", order_id="A-1", amount=float(amount.group(1)))


def catalog_names(request: ChatRequest) -> list[str]:
    return re.findall(r"<name>([^<]+)</name>", request.messages[request.transcript_start - 1].content or "")


def make_app(folder: Path, model: ScriptedModel, greeter: ScriptedModel | None = None) -> App:
    models = ModelRegistry()
    models.register("scripted/skills", model)
    models.register("scripted/greeter", greeter or ScriptedModel([reply("hello")], repeat_last=True))
    return App(
        agents=[
            define_agent(
                name="support",
                model="scripted/skills",
                instructions="Help the customer.",
                tools=[refund_order],
                skills=[skills_folder(folder)],
            ),
            define_agent(name="greeter", model="scripted/greeter", instructions="Greet."),
        ],
        models=models,
        skills=[skill(name="tone", description="How to write to customers.", instructions="Be brief.")],
    )


async def test_a_model_loads_a_skill_and_follows_it_and_the_catalog_names_exactly_the_agents_skills(
    client: Client, chamvi: ChamviClient, task_queue: str, tmp_path: Path
) -> None:
    refunds.clear()
    model = ScriptedModel(
        [call(TOOL_SKILL_LOAD, name="refund-procedure"), followed, reply("refunded")], repeat_last=True
    )
    greeter = ScriptedModel([reply("hello")])
    app = make_app(write_procedure(tmp_path / "skills", "12.5"), model, greeter)
    async with build_worker(client, app, task_queue=task_queue):
        run_id = (await chamvi.dispatch("support")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
        greeting = await chamvi.wait((await chamvi.dispatch("greeter")).run_id)
        transcript = await client.get_workflow_handle(run_id).query(
            QUERY_TRANSCRIPT, TranscriptQuery(upto=100), result_type=list[Message]
        )
    assert run.status == RunStatus.COMPLETED and greeting.status == RunStatus.COMPLETED
    assert refunds == [("A-1", 12.5)]
    first = model.requests[0]
    assert [m.role for m in first.messages] == ["system", "system", "user"]
    assert first.messages[0].content == "Help the customer."
    assert first.transcript_start == 2
    assert catalog_names(first) == ["tone", "refund-procedure"]  # the App's defaults, then its own
    assert [t.name for t in first.tools] == ["refund_order", "skill_load", "skill_read"]
    assert catalog_names(greeter.requests[0]) == ["tone"]
    assert all(m.role != "system" for m in transcript)  # the block is rebuilt per call, never stored
    loaded = next(s for s in run.steps if s.kind == "tool" and s.tool == TOOL_SKILL_LOAD)
    assert loaded.input == {"name": "refund-procedure"}
    assert isinstance(loaded.output, dict)
    assert loaded.output["skill"] == "refund-procedure" and len(loaded.output["version"]) == 12


async def test_a_run_waiting_for_an_approval_across_a_deploy_that_changed_a_skill_still_reads_its_version(
    client: Client, chamvi: ChamviClient, task_queue: str, tmp_path: Path
) -> None:
    refunds.clear()
    model = ScriptedModel(
        [
            call("refund_order", order_id="A-1", amount=1.0),
            call(TOOL_SKILL_LOAD, name="refund-procedure"),
            followed,
            reply("done"),
        ],
        repeat_last=True,
    )
    folder = write_procedure(tmp_path / "skills", "10")
    artifacts = ArtifactStore.local(tmp_path / "artifacts")  # the stack's store, shared by both deploys
    async with build_worker(
        client, local_plugin(make_app(folder, model), artifacts=artifacts), task_queue=task_queue
    ):
        run_id = (await chamvi.dispatch("support")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
    write_procedure(
        folder, "99", policy="v2"
    )  # the deploy: the skill changed, and the workers restarted on it
    async with build_worker(
        client, local_plugin(make_app(folder, model), artifacts=artifacts), task_queue=task_queue
    ):
        await chamvi.approvals.approve(run_id, approved=True)
        await until_status(chamvi, run_id, RunStatus.WAITING)  # the second refund, as its skill says
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
        later = (await chamvi.dispatch("support")).run_id
        await until_status(chamvi, later, RunStatus.WAITING)
        await chamvi.approvals.approve(later, approved=True)
        await until_status(chamvi, later, RunStatus.WAITING)
        await chamvi.approvals.approve(later, approved=True)
        await chamvi.wait(later)
    assert run.status == RunStatus.COMPLETED
    assert refunds == [("A-1", 1.0), ("A-1", 10.0), ("A-1", 1.0), ("A-1", 99.0)]
    resumed = next(r for r in model.requests if r.run_id == run_id and r.step == 1)
    assert "refund policy v1" in (resumed.messages[resumed.transcript_start - 1].content or "")
    fresh = next(r for r in model.requests if r.run_id == later and r.step == 1)
    assert "refund policy v2" in (fresh.messages[fresh.transcript_start - 1].content or "")
    versions = {
        s.output["version"]
        for s in run.steps
        if s.kind == "tool" and s.tool == TOOL_SKILL_LOAD and isinstance(s.output, dict)
    }
    assert len(versions) == 1


async def test_the_support_example_loads_its_refund_procedure_before_it_refunds(
    chamvi: ChamviClient, running_worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.support.app import app as support_app

    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))  # the example's outbox
    payload = {"order_id": "A-1001", "amount": 25, "to": "ada@example.com", "body": "Refunded."}
    async with running_worker(support_app):
        run_id = (await chamvi.dispatch("support", payload)).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
        searched = await chamvi.wait((await chamvi.dispatch("support", {"query": "shipping"})).run_id)
    tools = [s.tool for s in run.steps if s.kind == "tool"]
    assert tools[:3] == ["lookup_order", TOOL_SKILL_LOAD, "refund_order"]
    loaded = next(s for s in run.steps if s.tool == TOOL_SKILL_LOAD)
    assert isinstance(loaded.output, dict) and loaded.output["skill"] == "refund-procedure"
    assert loaded.output["files"] == [{"path": "references/eligibility.md", "size": 193}]
    assert "Refund at most the order's `total`" in loaded.output["instructions"]
    assert TOOL_SKILL_LOAD not in [s.tool for s in searched.steps]  # no refund asked: no procedure


async def test_a_runtime_agent_loads_one_of_the_apps_default_skills_in_its_run(
    client: Client, chamvi: ChamviClient, task_queue: str, tmp_path: Path
) -> None:
    model = ScriptedModel([call(TOOL_SKILL_LOAD, name="tone"), reply("brief")])
    app = make_app(write_procedure(tmp_path / "skills", "1"), ScriptedModel([reply("x")]))
    app.models.register("scripted/runtime", model)
    async with build_worker(client, app, task_queue=task_queue):
        await chamvi.agents.put("triage", {"model": "scripted/runtime", "instructions": "Triage."})
        run = await chamvi.wait((await chamvi.dispatch("triage")).run_id)
    assert run.status == RunStatus.COMPLETED
    assert catalog_names(model.requests[0]) == ["tone"]  # the App's defaults, not support's own
    loaded = next(s for s in run.steps if s.kind == "tool" and s.tool == TOOL_SKILL_LOAD)
    assert isinstance(loaded.output, dict) and loaded.output["instructions"] == "Be brief."
