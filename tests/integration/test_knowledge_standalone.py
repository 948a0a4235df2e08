"""``Knowledge``: collections indexed and searched in this process, over a Qdrant local-mode folder."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chamvi import Knowledge
from chamvi._lifecycle import EDGE_FOLDER
from chamvi.errors import BackgroundError, InvalidRunStateError, NotFoundError, ProviderUnavailableError
from chamvi.knowledge import folder, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.models.knowledge import CollectionStatus
from chamvi.settings import Settings
from tests.knowledge_helpers import CountingEmbedder
from tests.polling import eventually
from tests.support.docs import blocks

HANDBOOK = {
    "refunds.md": "# Refunds\n\nRefunds are paid within 30 days of the return.\n",
    "shipping.md": "# Shipping\n\nParcels leave the warehouse within two working days.\n",
    "returns/how.md": "# Returning an item\n\nPrint the label and drop the parcel at any post office.\n",
}


def handbook(root: Path) -> Path:
    for rel, text in HANDBOOK.items():
        path = root / "handbook" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "handbook"


def knowledge(tmp_path: Path, embedder: CountingEmbedder, **options: object) -> Knowledge:
    registry = EmbeddingRegistry()
    registry.register(embedder.ref, embedder)
    collection = knowledge_collection("handbook", model=embedder.ref, sources=[folder(handbook(tmp_path))])
    settings = Settings(data=tmp_path / "data")
    return Knowledge([collection], settings=settings, embedders=registry, **options)  # type: ignore[arg-type]


async def test_a_pass_indexes_the_folder_into_qdrant_edge_on_disk_and_the_next_process_embeds_nothing(
    tmp_path: Path,
) -> None:
    first = CountingEmbedder()
    async with knowledge(tmp_path, first) as handbook_knowledge:
        meta = await handbook_knowledge.sync("handbook")
        found = await handbook_knowledge.search("when is my money paid back", top_k=1)
    assert meta.status == CollectionStatus.READY and meta.documents == 3
    assert meta.last_stats is not None and meta.last_stats.embedded == 3
    assert [m.document for m in found.matches] == ["refunds.md"]
    assert (tmp_path / "data" / EDGE_FOLDER).is_dir()

    again = CountingEmbedder()
    async with knowledge(tmp_path, again) as reopened:
        meta = await reopened.sync("handbook")
        status = await reopened.status("handbook")
    assert meta.last_stats is not None and (meta.last_stats.embedded, meta.last_stats.unchanged) == (0, 3)
    assert again.texts == 0 and status is not None and status.status == CollectionStatus.READY


async def test_syncs_during_a_pass_ask_for_exactly_one_more_pass_never_a_parallel_one(
    tmp_path: Path,
) -> None:
    gated = CountingEmbedder(gate=asyncio.Event())
    async with knowledge(tmp_path, gated) as handbook_knowledge:
        await eventually(gated.embedding, "the first pass embedding")  # start() began it
        syncs = [asyncio.ensure_future(handbook_knowledge.sync("handbook")) for _ in range(3)]
        await asyncio.sleep(0)
        assert gated.gate is not None
        gated.gate.set()
        answers = await asyncio.gather(*syncs)
        meta = await handbook_knowledge.status("handbook")
    assert meta is not None and meta.passes == 2  # the one start() began, and one more for the three
    assert {a.passes for a in answers} == {2} and gated.most_active == 1


async def test_a_failed_pass_is_stored_reported_to_on_error_and_the_next_sync_recovers(
    tmp_path: Path,
) -> None:
    failing = CountingEmbedder(failures=[ProviderUnavailableError("embedding provider is down")])
    errors: list[tuple[BackgroundError, str | None]] = []
    async with knowledge(
        tmp_path, failing, on_error=lambda e, run: errors.append((e, run))
    ) as handbook_knowledge:

        async def reported() -> bool | None:
            return True if errors else None

        await eventually(reported, "the first pass failing")  # start() began it
        stored = await handbook_knowledge.status("handbook")
        recovered = await handbook_knowledge.sync("handbook")
    [(error, run_id)] = errors
    assert (error.source, run_id, type(error.cause)) == ("knowledge", None, ProviderUnavailableError)
    assert error.message.startswith("knowledge error: collection 'handbook': embedding provider is down")
    assert stored is not None and stored.error == "embedding provider is down"
    assert stored.next_attempt is not None
    assert recovered.status == CollectionStatus.READY and recovered.error is None


async def test_stop_aborts_a_pass_under_way_and_a_later_start_finishes_it(tmp_path: Path) -> None:
    stuck = CountingEmbedder(gate=asyncio.Event())  # never opens
    handbook_knowledge = knowledge(tmp_path, stuck)
    await handbook_knowledge.start()
    await eventually(stuck.embedding, "the pass embedding")
    waiting = asyncio.ensure_future(handbook_knowledge.sync("handbook"))
    await asyncio.sleep(0)  # the sync is asked for
    await handbook_knowledge.stop()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with pytest.raises(InvalidRunStateError, match=r"call start\(\) first"):
        await handbook_knowledge.sync("handbook")

    async with knowledge(tmp_path, CountingEmbedder()) as later:
        meta = await later.sync("handbook")
        with pytest.raises(NotFoundError, match="no collection 'tickets': declared here are 'handbook'"):
            await later.sync("tickets")
    assert meta.status == CollectionStatus.READY and meta.documents == 3


def test_the_readme_example_indexes_a_handbook_folder_and_prints_the_best_passages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = [
        b.body for b in blocks("knowledge/collections.md", lang="python") if "Knowledge([handbook]" in b.body
    ]
    handbook(tmp_path)
    monkeypatch.chdir(tmp_path)  # the example reads ./handbook
    env = {**os.environ, "CHAMVI_DATA": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    best, *others = done.stdout.splitlines()
    assert best.split(" ", 1)[1] == "refunds.md: # Refunds Refunds are paid within 30 days of the return."
    assert sorted(line.split(" ")[1] for line in others) == ["returns/how.md:", "shipping.md:"]
