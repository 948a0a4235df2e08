"""`chamvi knowledge list / sync / search` against the session dev server and a worker with its own Qdrant."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from temporalio.client import Client

from chamvi import App, define_agent
from chamvi._constants import (
    ACTIVITY_KNOWLEDGE_SEARCH,
    KNOWLEDGE_COLLECTION_WORKFLOW,
    KNOWLEDGE_ID_PREFIX,
    KNOWLEDGE_PASS_WORKFLOW,
)
from chamvi._starters import request_sync
from chamvi.http import create_api
from chamvi.knowledge import define_source, folder, knowledge_collection, knowledge_tools
from chamvi.knowledge.managed import ManagedCollections
from chamvi.knowledge.sources import Source
from chamvi.models.knowledge import CollectionInput
from tests.knowledge_helpers import knowledge_worker, new_store, wait_for_passes
from tests.support.cli import cli_on
from tests.support.http_api import bearer, make_tokens, serving

Cli = Callable[..., "asyncio.Future[Result]"]


@pytest.fixture
def name() -> str:
    return f"kb-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def chamvi_cli(client: Client, task_queue: str) -> Cli:
    """``await chamvi_cli("knowledge", "list")`` on this test's queue, in a thread of its own."""
    return cli_on(client, task_queue)


def write_handbook(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    (root / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days of the return.\n")
    (root / "shipping.md").write_text("# Shipping\n\nWe ship worldwide with tracked parcels.\n")
    (root / "warranty.md").write_text("# Warranty\n\nEvery device has a two year warranty.\n")
    return root


def app_for(name: str, source: Source) -> App:
    reader = define_agent(
        name="reader", model="local/demo", instructions="Read.", tools=knowledge_tools(collections=[name])
    )
    return App(
        agents=[reader], collections=[knowledge_collection(name, model="test/hash-64", sources=[source])]
    )


@pytest.fixture
async def handbook(client: Client, task_queue: str, tmp_path: Path, name: str) -> AsyncIterator[Path]:
    """A folder collection of three pages, served and indexed once (its first pass has ended)."""
    root = write_handbook(tmp_path / "handbook")
    async with knowledge_worker(client, app_for(name, folder(root)), new_store(), task_queue):
        await wait_for_passes(client, name, 1)
        yield root


async def listed(chamvi_cli: Cli, name: str) -> dict[str, object]:
    """The collection's row in `knowledge list --json`, once Temporal's visibility lists it."""
    deadline = time.monotonic() + 30
    while True:
        result = await chamvi_cli("knowledge", "list", "--json")
        assert result.exit_code == 0, result.output
        rows = {row["name"]: row for row in json.loads(result.stdout)}
        if name in rows:
            return rows[name]
        assert time.monotonic() < deadline, result.stdout
        await asyncio.sleep(0.2)


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


async def test_knowledge_list_shows_a_ready_collection_with_its_counts(
    handbook: Path, chamvi_cli: Cli, name: str
) -> None:
    row = await listed(chamvi_cli, name)
    assert {k: row[k] for k in ("status", "generation", "model", "documents", "passages", "error")} == {
        "status": "ready",
        "generation": 1,
        "model": "test/hash-64",
        "documents": 3,
        "passages": 3,
        "error": None,
    }
    assert row["last_pass"] is not None and row["running"] is False

    table = await chamvi_cli("knowledge", "list")
    assert table.exit_code == 0, table.output
    header, *rows = table.stdout.splitlines()
    columns = ("NAME", "STATUS", "GEN", "MODEL", "DOCS", "PASSAGES", "SKIPPED", "LAST PASS", "ACTIVITY")
    assert re.split(r"\s{2,}", header) == list(columns)
    line = next(r for r in rows if r.startswith(name))
    assert line.split()[:7] == [name, "ready", "1", "test/hash-64", "3", "3", "0"]
    assert line.split()[-1] == "idle"


async def test_knowledge_search_finds_the_right_document(handbook: Path, chamvi_cli: Cli, name: str) -> None:
    found = await chamvi_cli("knowledge", "search", name, "how long until refunds are paid", "--top-k", "2")
    assert found.exit_code == 0, found.output
    first, excerpt, *rest = found.stdout.splitlines()
    score, document, title = first.split(maxsplit=2)
    assert (document, title) == ("refunds.md", "Refunds")
    assert 0 < float(score) <= 1
    assert excerpt.strip() == "# Refunds Refunds are paid within 14 days of the return."
    assert len(rest) == 2  # --top-k 2: one more match, two lines each

    as_json = await chamvi_cli("knowledge", "search", name, "tracked parcels worldwide", "--json")
    matches = json.loads(as_json.stdout)["matches"]
    assert matches[0]["document"] == "shipping.md" and matches[0]["collection"] == name
    assert [m["score"] for m in matches] == sorted((m["score"] for m in matches), reverse=True)


async def test_a_search_from_the_cli_asks_the_collections_workflow_and_leaves_no_workflow_in_the_list(
    handbook: Path, client: Client, chamvi_cli: Cli, task_queue: str, name: str
) -> None:
    found = await chamvi_cli("knowledge", "search", name, "refunds", "--top-k", "1")
    assert found.exit_code == 0, found.output
    history = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).fetch_history()
    searched = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert ACTIVITY_KNOWLEDGE_SEARCH in searched
    listed = [w.workflow_type async for w in client.list_workflows(f'TaskQueue = "{task_queue}"')]
    assert [t for t in listed if t != KNOWLEDGE_PASS_WORKFLOW] == [KNOWLEDGE_COLLECTION_WORKFLOW]


async def test_a_search_that_no_worker_answers_in_time_says_so_in_one_line(
    client: Client, chamvi_cli: Cli, task_queue: str, name: str
) -> None:
    await client.start_workflow(  # running, but no worker polls its queue
        KNOWLEDGE_COLLECTION_WORKFLOW,
        CollectionInput(name=name),
        id=KNOWLEDGE_ID_PREFIX + name,
        task_queue=task_queue,
    )
    result = await chamvi_cli("knowledge", "search", name, "refunds", "--timeout", "1")
    assert one_line_error(result) == (
        f"Error: no worker answered the search within 1 s on task queue {task_queue!r}: start one with "
        "`chamvi dev` or `chamvi worker`"
    )


async def test_knowledge_sync_wait_runs_a_pass_and_reports_its_counts(
    handbook: Path, chamvi_cli: Cli, name: str
) -> None:
    (handbook / "returns.md").write_text("# Returns\n\nReturn labels are free within 30 days.\n")
    (handbook / "warranty.md").unlink()
    synced = await chamvi_cli("knowledge", "sync", name, "--wait")
    assert synced.exit_code == 0, synced.output
    assert synced.stdout.splitlines() == [
        f"{name}: ready, generation 1, model test/hash-64, 3 documents, 3 passages",
        "pass: 3 read, 2 unchanged, 1 embedded (1 passages), 1 deleted, 0 skipped, 0 failed, "
        "1 embedding call(s)",
    ]
    again = await chamvi_cli("knowledge", "sync", name, "--wait", "--json")
    assert again.exit_code == 0, again.output
    row = json.loads(again.stdout)
    assert row["passes"] == 3 and row["last_stats"]["unchanged"] == 3
    assert row["last_stats"]["embedding_calls"] == 0

    found = await chamvi_cli("knowledge", "search", name, "free return labels", "--top-k", "1")
    assert found.stdout.split()[1] == "returns.md"
    requested = await chamvi_cli("knowledge", "sync", name)
    assert requested.exit_code == 0 and requested.stdout.strip() == f"sync requested for {name!r}"


async def test_an_unknown_collection_is_one_line_naming_the_known_ones(
    handbook: Path, chamvi_cli: Cli, name: str
) -> None:
    await listed(chamvi_cli, name)
    for command in (["search", "handbok", "refunds"], ["sync", "handbok", "--wait"]):
        result = await chamvi_cli("knowledge", *command)
        message = one_line_error(result)
        assert message == f"Error: unknown collection 'handbok': known collections are {name!r}"


async def test_no_collection_yet_is_said_in_one_line(chamvi_cli: Cli, task_queue: str, name: str) -> None:
    # a name of its own: the session's dev server may run another test's 'handbook' collection (the
    # example app's), whose workflow id is the same on every task queue
    result = await chamvi_cli("knowledge", "search", name, "refunds")
    assert one_line_error(result) == (
        f"Error: unknown collection {name!r}: no collection runs on task queue {task_queue!r} yet "
        "(a worker starts the app's collections when it boots)"
    )
    listing = await chamvi_cli("knowledge", "list")
    assert listing.exit_code == 0 and listing.stdout == ""
    assert "no collections on task queue" in listing.stderr


async def test_a_collection_that_is_not_ready_fails_search_and_sync_in_one_line(
    client: Client, chamvi_cli: Cli, task_queue: str, name: str
) -> None:
    async def tickets() -> AsyncIterator[dict[str, str]]:
        yield {"id": "T-1", "content": "first"}
        raise ConnectionError("the ticket system is down")

    source = define_source(kind="tickets", documents=tickets)
    async with knowledge_worker(client, app_for(name, source), new_store(), task_queue):
        await wait_for_passes(client, name, 1)
        searched = await chamvi_cli("knowledge", "search", name, "anything")
        row = await listed(chamvi_cli, name)
        table = await chamvi_cli("knowledge", "list")
        synced = await chamvi_cli("knowledge", "sync", name, "--wait")  # waits for the retry after 5 s
    assert one_line_error(searched) == f'Error: Knowledge collection "{name}" is not ready.'
    assert row["status"] == "pending" and row["generation"] is None
    error = str(row["error"])
    assert error.endswith("the ticket system is down") and row["next_attempt"] is not None
    assert f"{name}: error: {error}" in table.stdout
    assert synced.exit_code == 1
    assert (
        synced.stderr.strip()
        .splitlines()[-1]
        .startswith(f"Error: the pass over {name!r} failed: {error} (next attempt at ")
    )


def add_entries_a_pass_skips(root: Path, outside: Path) -> int:
    """Puts next to the handbook what a folder pass must skip, made for real; returns how many."""
    (outside / "secret.md").parent.mkdir(parents=True)
    (outside / "secret.md").write_text("# Secret\n\nNever indexed.\n")
    (root / "linked-file.md").symlink_to(outside / "secret.md")
    (root / "linked-folder").symlink_to(outside, target_is_directory=True)
    (root / "nested").mkdir()
    (root / "nested" / "linked.md").symlink_to(outside / "secret.md")
    os.mkfifo(root / "pipe.md")
    with (root / "huge.md").open("wb") as huge:
        huge.truncate(50 * 1024 * 1024)  # 50 MB (sparse: no disk spent)
    (root / "latin1.md").write_bytes("caf\u00e9".encode("latin-1"))
    os.close(os.open(bytes(root) + b"/name-\xff.md", os.O_CREAT | os.O_WRONLY))
    return 7


async def test_entries_a_folder_pass_skips_are_counted_in_its_stats_the_list_and_the_http_view(
    client: Client, chamvi_cli: Cli, task_queue: str, tmp_path: Path, name: str
) -> None:
    root = write_handbook(tmp_path / "handbook")
    skipped = add_entries_a_pass_skips(root, tmp_path / "outside")
    app = app_for(name, folder(root))
    store = new_store()
    managed = ManagedCollections(
        store,
        app.embedders,
        default_model=None,
        declared=app.collections,
        request_sync=lambda n: request_sync(client, task_queue, n),
    )
    tokens = make_tokens(reader=["knowledge:read"])
    api = create_api(tokens=list(tokens.values()), managed=managed, runs=None)
    async with knowledge_worker(client, app, store, task_queue):
        state = await wait_for_passes(client, name, 1)
        row = await listed(chamvi_cli, name)
        table = await chamvi_cli("knowledge", "list")
        async with (
            serving(api) as url,
            httpx.AsyncClient(base_url=url, headers=bearer(tokens["reader"])) as http,
        ):
            shown = await http.get(f"/knowledge/collections/{name}")
            every = await http.get("/knowledge/collections")

    assert state.meta is not None and state.meta.last_stats is not None
    assert (state.meta.last_stats.read, state.meta.last_stats.skipped) == (3, skipped)
    assert row["documents"] == 3 and row["skipped"] == skipped
    assert row["last_stats"]["skipped"] == skipped  # type: ignore[index]
    header, *lines = (re.split(r"\s{2,}", line) for line in table.stdout.splitlines())
    cells = next(cells for cells in lines if cells[0] == name)
    assert cells[header.index("SKIPPED")] == str(skipped)
    assert shown.status_code == 200 and shown.json()["skipped"] == skipped
    assert [c["skipped"] for c in every.json()["data"] if c["name"] == name] == [skipped]
