"""An app for tests that kill a worker process in the middle of an indexing pass.

Its one collection (named by ``CHAMVI_TEST_COLLECTION``, so each test has its own workflow) embeds
with ``test/stalling``: the first call in the test's folder notes ``embed-started`` in
``CHAMVI_TEST_DIR/events.txt`` and never answers, as if the worker hung or died there; every later
call (in the next worker) embeds at once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

from chamvi import App, define_agent
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.providers import ModelRegistry, ScriptedModel, reply


class StallingOnceEmbedder:
    """``test/hash-64`` vectors, except that the first call of a test stalls forever."""

    ref = "test/stalling"
    dimensions = 64

    def __init__(self) -> None:
        self._hash = HashEmbedder(64)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        events = Path(os.environ["CHAMVI_TEST_DIR"]) / "events.txt"
        first = not events.exists() or "embed-started" not in events.read_text()
        with events.open("a") as file:
            file.write("embed-started\n")
        if first:
            await asyncio.Event().wait()
        return [self._hash.vector(text) for text in texts]


async def _documents() -> AsyncIterator[dict[str, str]]:
    for i in range(5):
        yield {"id": f"doc-{i}", "content": f"Passage number {i}."}


embedders = EmbeddingRegistry()
embedders.register(StallingOnceEmbedder.ref, StallingOnceEmbedder())
models = ModelRegistry()
models.register("scripted/idle", ScriptedModel([reply("ok")]))

app = App(
    agents=[define_agent(name="idle", model="scripted/idle", instructions="Nothing.")],
    models=models,
    embedders=embedders,
    collections=[
        knowledge_collection(
            os.environ.get("CHAMVI_TEST_COLLECTION", "stalling"),
            model=StallingOnceEmbedder.ref,
            sources=[define_source(documents=_documents)],
        )
    ],
)
