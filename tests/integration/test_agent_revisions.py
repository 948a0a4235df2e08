"""Runtime agents' revisions on the artifact store's two production paths: a folder, and S3 (moto's
server on loopback), through the same obstore client: create-only writes, listings, reads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chamvi.agent_revisions import ObjectRevisionStore
from chamvi.artifacts import ArtifactStore
from chamvi.models import AgentDefinition, AgentRevision
from tests.support.s3_server import S3Server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


@pytest.fixture(params=["local", "s3"])
def artifacts(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return ArtifactStore.local(tmp_path / "artifacts")
    s3: S3Server = request.getfixturevalue("s3")
    return ArtifactStore.open(f"s3://{s3.bucket}/{tmp_path.name}", **s3.config)


def revision(name: str, number: int, text: str | None = "x") -> AgentRevision:
    definition = AgentDefinition(name=name, instructions=text) if text is not None else None
    return AgentRevision(name=name, revision=number, definition=definition, created_at=datetime.now(UTC))


async def test_a_revision_number_is_written_once_and_read_back(artifacts: ArtifactStore) -> None:
    store = ObjectRevisionStore(artifacts.store, artifacts.location)
    assert await store.create(revision("triage", 1, "first"))
    assert not await store.create(revision("triage", 1, "second"))  # taken: the first stays
    read = await store.read("triage", 1)
    assert read is not None and read.definition is not None and read.definition.instructions == "first"
    assert await store.read("triage", 2) is None


async def test_racing_writers_of_one_number_leave_one_winner(artifacts: ArtifactStore) -> None:
    store = ObjectRevisionStore(artifacts.store, artifacts.location)
    won = await asyncio.gather(*(store.create(revision("triage", 1, f"writer {n}")) for n in range(8)))
    assert won.count(True) == 1


async def test_the_latest_revision_of_each_agent_is_found_by_listing(artifacts: ArtifactStore) -> None:
    store = ObjectRevisionStore(artifacts.store, artifacts.location)
    for number in range(1, 12):  # past 9 and 10: numbers, not names, are compared
        await store.create(revision("triage", number, f"v{number}"))
    await store.create(revision("billing", 1))
    await store.create(revision("billing", 2, None))  # removed
    await artifacts.put("run-a", 0, "text/plain", b"an artifact beside them")
    latest = await store.latest("triage")
    assert latest is not None and latest.revision == 11
    assert [(r.name, r.revision, r.removed) for r in await store.latest_all()] == [
        ("billing", 2, True),
        ("triage", 11, False),
    ]
    assert await store.latest("nosuch") is None
    assert [a.id for a in await artifacts.list("run-a")] == ["run-a.0000"]
