"""The knowledge base tools in real runs on Temporal: links that must resolve, effects applied once,
and a retire that a person approves, or that nobody answers for 24 hours."""

from __future__ import annotations

import shutil
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from chamvi import App, ChamviClient, RunStatus, RunView, define_agent
from chamvi.knowledge_store import FileKnowledgeStore, knowledge_store_tools
from chamvi.providers import ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from chamvi.runtime import build_worker
from tests.integration.test_approval_timeout import skipping_env  # noqa: F401 (a fixture)
from tests.polling import until_status

REFUNDS = "Refunds are paid once [the return](concept/returns) arrives."
RETURNS = "Items come back within 30 days."


def wiki_app(store: FileKnowledgeStore, turns: list[ScriptedTurn]) -> App:
    models = ModelRegistry()
    models.register("scripted/librarian", ScriptedModel(turns))
    librarian = define_agent(
        name="librarian",
        model="scripted/librarian",
        instructions="Keep the wiki.",
        tools=knowledge_store_tools(store, interactive=True),
    )
    return App(agents=[librarian], models=models)


def tool_steps(run: RunView) -> list:
    return [s for s in run.steps if s.kind == "tool"]


async def test_a_missing_link_is_a_tool_error_until_the_target_exists(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    store = FileKnowledgeStore(tmp_path)
    refunds = {"type": "concept", "slug": "refunds", "title": "Refunds", "content": REFUNDS}
    turns = [
        call("knowledge_create", **refunds),
        call("knowledge_create", type="concept", slug="returns", title="Returns", content=RETURNS),
        call("knowledge_create", **refunds),
        call("knowledge_create", **refunds),  # the same call again: the recorded effect, no second write
        call("knowledge_read", id="concept/returns"),
        call("knowledge_log", operation="ingest", what="the refund policy", pages=["concept/refunds"]),
        call("knowledge_read", id="log"),
        call("knowledge_create", type="entity", slug="acme", title="Acme"),
        reply("done"),
    ]
    async with running_worker(wiki_app(store, turns)):
        run = await chamvi.wait((await chamvi.dispatch("librarian")).run_id)
    assert run.status == RunStatus.COMPLETED
    missing, returns, created, again, read, logged, log, template = tool_steps(run)
    assert missing.error is not None and missing.error.code == "missing_links"
    assert "links to pages that do not exist: 'concept/returns'" in missing.error.message
    assert returns.output == "Created concept/returns."
    assert created.output == again.output == "Created concept/refunds."
    assert "linked from: concept/refunds" in read.output and RETURNS in read.output
    assert logged.output == "Logged."
    assert log.output.endswith("ingest | the refund policy (pages: concept/refunds)")
    assert template.output.startswith("No content given, so nothing was created. Page type 'entity': ")
    assert "## Facts" in template.output
    assert (
        (tmp_path / "concepts" / "refunds.md")
        .read_text()
        .endswith("Refunds are paid once [the return](returns.md) arrives.\n")
    )
    assert [p.id for p in await store.list()] == ["concept/refunds", "concept/returns"]


def retire_turns() -> list[ScriptedTurn]:
    return [
        call(
            "knowledge_retire", "call-retire", id="concept/returns", reason="returns are no longer accepted"
        ),
        reply("done"),
    ]


async def seeded(tmp_path: Path) -> FileKnowledgeStore:
    store = FileKnowledgeStore(tmp_path)
    await store.create("concept", "returns", "Returns", RETURNS)
    return store


async def test_retire_asks_a_person_first_and_retires_once_approved(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    store = await seeded(tmp_path)
    async with running_worker(wiki_app(store, retire_turns())):
        run_id = (await chamvi.dispatch("librarian")).run_id
        waiting = await until_status(chamvi, run_id, RunStatus.WAITING)
        assert (
            waiting.waiting is not None and waiting.waiting.title == "Retire knowledge page concept/returns?"
        )
        page = await store.read("concept/returns")
        assert page is not None and page.status == "active"  # nothing happens before the answer
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
    assert tool_steps(run)[0].output == "Retired concept/returns."
    page = await store.read("concept/returns")
    assert page is not None and page.status == "retired"
    assert page.fields["reason"] == "returns are no longer accepted"


async def test_a_retire_nobody_answers_for_24_hours_leaves_the_page_as_it_is(
    skipping_env: WorkflowEnvironment,  # noqa: F811
    tmp_path: Path,
) -> None:
    store = await seeded(tmp_path)
    task_queue = f"skip-{uuid.uuid4().hex[:8]}"
    chamvi = ChamviClient(skipping_env.client, task_queue=task_queue)
    async with build_worker(skipping_env.client, wiki_app(store, retire_turns()), task_queue=task_queue):
        run_id = (await chamvi.dispatch("librarian")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await skipping_env.sleep(timedelta(hours=24, minutes=1))
        run = await until_status(chamvi, run_id, RunStatus.COMPLETED)
    assert tool_steps(run)[0].output == "Not retired: approval timed out. The page stays as it is."
    page = await store.read("concept/returns")
    assert page is not None and page.status == "active" and "reason" not in page.fields
    assert [p.id for p in await store.list()] == ["concept/returns"]


async def test_the_demo_model_on_the_example_wiki_reads_and_writes_nothing(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    from examples.support.wiki_agent import WIKI_DIR, librarian

    shutil.copytree(WIKI_DIR, tmp_path / "wiki")
    before = {p: p.read_bytes() for p in (tmp_path / "wiki").rglob("*") if p.is_file()}
    demo = define_agent(
        name="librarian",
        model="local/demo",
        instructions=list(librarian.instructions),
        tools=knowledge_store_tools(FileKnowledgeStore(tmp_path / "wiki"), interactive=True),
    )
    payload = {"id": "concept/refund-window", "query": "refund", "type": "concept"}
    async with running_worker(App(agents=[demo])):
        run = await chamvi.wait((await chamvi.dispatch("librarian", payload)).run_id)
    assert run.status == RunStatus.COMPLETED
    steps = {s.tool: s for s in tool_steps(run)}
    assert "- [Refund window](concept/refund-window)" in steps["knowledge_index"].output
    assert steps["knowledge_read"].output.startswith("# Refund window\n")
    assert steps["knowledge_search"].output[0]["id"] == "concept/refund-window"
    assert steps["knowledge_check"].output["ok"] is True
    # the writing tools need fields this payload lacks (a slug, a text, a reason): never called
    assert list(steps) == ["knowledge_read", "knowledge_index", "knowledge_search", "knowledge_check"]
    assert all(s.error is None for s in steps.values())
    assert {p: p.read_bytes() for p in (tmp_path / "wiki").rglob("*") if p.is_file()} == before
