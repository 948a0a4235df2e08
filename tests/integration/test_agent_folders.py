"""An agent's own knowledge folder, indexed for real: that agent finds its passages, another cannot."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, define_agent
from chamvi.knowledge import agent_collection_name, folder, knowledge_collection, knowledge_tools
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.plugin import ChamviPlugin
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.settings import Settings
from tests.knowledge_helpers import CountingEmbedder, new_store, wait_for_meta


async def test_an_agent_finds_a_passage_of_its_own_folder_and_another_agent_cannot_search_it(
    client: Client, chamvi: ChamviClient, task_queue: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    own, shared = tmp_path / "support", tmp_path / "shared"
    own.mkdir()
    shared.mkdir()
    (own / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days of the return.\n")
    (shared / "hours.md").write_text("# Hours\n\nThe shop opens at nine.\n")
    support, sales, handbook = f"support-{suffix}", f"sales-{suffix}", f"handbook-{suffix}"
    folder_name = agent_collection_name(support)
    embedder = CountingEmbedder()
    embedders = EmbeddingRegistry()
    embedders.register(embedder.ref, embedder)
    models = ModelRegistry()
    models.register(
        "scripted/support",
        ScriptedModel([call("knowledge_search", query="when are refunds paid"), reply("14 days")]),
    )
    models.register(
        "scripted/sales",
        ScriptedModel([call("knowledge_search", query="refunds", collection=folder_name), reply("no")]),
    )
    app = App(
        agents=[
            define_agent(
                name=support,
                model="scripted/support",
                instructions="Help.",
                knowledge=folder(own),
                tools=knowledge_tools(collections=[handbook]),
            ),
            define_agent(
                name=sales,
                model="scripted/sales",
                instructions="Sell.",
                tools=knowledge_tools(collections=[handbook]),
            ),
        ],
        models=models,
        embedders=embedders,
        embedding_model=embedder.ref,
        collections=[knowledge_collection(handbook, model=embedder.ref, sources=[folder(shared)])],
    )
    store = new_store()
    # a data folder of its own: the plugin's default artifact store would make ./.chamvi/artifacts
    plugin = ChamviPlugin(app, index=store, settings=Settings(data=tmp_path / "data"))
    async with build_worker(client, plugin, task_queue=task_queue):
        await plugin.collections_started()
        meta = await wait_for_meta(store, folder_name, "ready")
        await wait_for_meta(store, handbook, "ready")
        found = await chamvi.wait((await chamvi.dispatch(support)).run_id)
        refused = await chamvi.wait((await chamvi.dispatch(sales)).run_id)
    assert meta.documents == 1 and meta.generation == 1
    assert found.status == RunStatus.COMPLETED
    matches = next(s for s in found.steps if s.kind == "tool").output["matches"]
    assert matches[0]["collection"] == folder_name and matches[0]["document"] == "refunds.md"
    assert {m["collection"] for m in matches} == {folder_name, handbook}
    error = next(s for s in refused.steps if s.kind == "tool").error
    assert error is not None and f"collection {folder_name!r} is not searchable here" in error.message
