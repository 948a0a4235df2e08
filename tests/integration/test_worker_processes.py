"""Real worker processes: SIGKILL mid-run or mid-pass, the next worker finishes; SIGTERM drains."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecution, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from chamvi import ChamviClient, RunStatus
from chamvi.artifacts import ArtifactStore
from chamvi.models.knowledge import CollectionState, CollectionStatus, PassResult
from tests.knowledge_helpers import answered_state, pass_workflows
from tests.polling import SLOW_PATIENCE_SECONDS, SLOW_TEST_TIMEOUT, eventually

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(SLOW_TEST_TIMEOUT)  # each test waits on worker processes starting


@pytest.fixture
def spawn_worker(temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path) -> Iterator:
    processes: list[subprocess.Popen[bytes]] = []
    address = temporal_env.client.service_client.config.target_host

    def spawn(app: str = "tests.apps.crash:app", **env_vars: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "CHAMVI_TEST_DIR": str(tmp_path),
            "CHAMVI_DATA": str(tmp_path / "data"),
            **env_vars,
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "worker.py",
                "--app",
                app,
                "--address",
                address,
                "--task-queue",
                task_queue,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"worker{len(processes)}.log").open("wb"),
        )
        processes.append(process)
        return process

    yield spawn
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


async def _until_event(path: Path, event: str, count: int = 1) -> None:
    async def probe() -> bool | None:
        return True if path.exists() and path.read_text().count(event) >= count else None

    await eventually(probe, f"{event!r}", seconds=SLOW_PATIENCE_SECONDS)  # a worker process may be starting


async def _killed_after(
    spawn_worker, chamvi: ChamviClient, app: str, agent: str, events: Path, event: str
) -> str:
    """Dispatches a run of ``agent`` to a worker of ``app`` and SIGKILLs it once ``event`` happened."""
    first = spawn_worker(app)
    run_id = (await chamvi.dispatch(agent)).run_id
    await _until_event(events, event)
    first.send_signal(signal.SIGKILL)
    first.wait()
    return run_id


async def test_a_killed_worker_applies_an_effect_once_and_a_new_worker_finishes_the_run(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    first = spawn_worker()
    run_id = (await chamvi.dispatch("crash", {"customer": "c-1"})).run_id
    await _until_event(events, "charge-applied")
    first.send_signal(signal.SIGKILL)  # after the side effect, before its completion is recorded
    first.wait()

    second = spawn_worker()
    await _until_event(events, "hang-started")
    second.send_signal(signal.SIGKILL)  # after `charge` completed: replay must not run it again
    second.wait()

    spawn_worker()
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)
    assert run.status == RunStatus.COMPLETED, run.error
    assert (tmp_path / "ledger.txt").read_text().count("42 ") == 1
    assert events.read_text().count("charge-applied") == 1
    charge = next(s for s in run.steps if s.tool == "charge")
    assert charge.output == "charged (found after a crash)"


async def test_a_put_in_an_effect_tool_retried_after_a_crash_stores_once(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    first = spawn_worker()
    run_id = (await chamvi.dispatch("report")).run_id
    await _until_event(events, "report-put")
    first.send_signal(signal.SIGKILL)  # the file is stored; the call's completion never reaches Temporal
    first.wait()

    spawn_worker()
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)

    assert run.status == RunStatus.COMPLETED, run.error
    assert events.read_text().splitlines() == [f"report-put {run_id}.0000"] * 2
    stored = await ArtifactStore.local(tmp_path / "data" / "artifacts").list(run_id)
    assert [(a.id, a.filename) for a in stored] == [
        (f"{run_id}.0000", "report.md"),
        (f"{run_id}.0001", "note.txt"),
    ]
    assert [s.output for s in run.steps if s.kind == "tool"] == [f"{run_id}.0000", f"{run_id}.0001"]


async def test_a_worker_killed_in_the_middle_of_a_put_leaves_nothing_behind_once_the_put_is_redone(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    folder = tmp_path / "data" / "artifacts"
    first = spawn_worker()
    run_id = (await chamvi.dispatch("bulk")).run_id

    async def writing() -> list[Path] | None:
        partial = [p for p in folder.glob("*/*") if "#" in p.name and p.stat().st_size > 0]
        return partial or None

    await _until_event(tmp_path / "events.txt", "bulk-put-started")
    partial = await eventually(writing, "the put's temporary file", seconds=SLOW_PATIENCE_SECONDS)
    first.send_signal(signal.SIGKILL)  # halfway through the bytes
    first.wait()
    assert all(p.exists() for p in partial)

    spawn_worker()
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)

    assert run.status == RunStatus.COMPLETED, run.error
    assert sorted(p.name for p in folder.glob("*/*")) == ["0000", "0000.json"]
    stored = await ArtifactStore.local(folder).list(run_id)
    assert [(a.id, a.size) for a in stored] == [(f"{run_id}.0000", 300_000_000)]


async def test_an_effect_mcp_tool_is_applied_once_across_a_killed_worker(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    # the MCP server saved the note; the result never reached Temporal
    app = "tests.apps.mcp_notes:app"
    run_id = await _killed_after(spawn_worker, chamvi, app, "notes", events, "note-saved")

    spawn_worker("tests.apps.mcp_notes:app")
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)
    assert run.status == RunStatus.COMPLETED, run.error
    assert (tmp_path / "notes.txt").read_text().count("refund-42:") == 1
    assert events.read_text().count("note-saved") == 1
    # the key the server could have deduplicated with
    assert f"note-saved effect-key={run_id}:note:refund-42" in events.read_text()
    step = next(s for s in run.steps if s.tool == "add_note")
    assert step.output == "saved (found after a crash)"


async def test_a_graceful_shutdown_drains_the_tool_call_in_flight(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    first = spawn_worker()
    run_id = (await chamvi.dispatch("drain")).run_id
    await _until_event(events, "drain-started")
    first.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(first.wait, 30) == 0
    assert events.read_text().splitlines() == ["drain-started", "drain-finished"]

    spawn_worker()
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)
    assert run.status == RunStatus.COMPLETED
    assert events.read_text().count("drain-started") == 1


async def test_a_pass_workflow_on_a_killed_worker_fails_and_the_next_pass_workflow_finishes_the_generation(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    name = f"killed-{uuid.uuid4().hex[:8]}"
    first = spawn_worker("tests.apps.indexing:app", CHAMVI_TEST_COLLECTION=name)
    await _until_event(tmp_path / "events.txt", "embed-started")

    async def running_pass() -> WorkflowExecution | None:
        found = await pass_workflows(chamvi.client, name)
        return found[0] if len(found) == 1 and found[0].status == WorkflowExecutionStatus.RUNNING else None

    running = await eventually(running_pass, "the pass running as a workflow of its own")
    first.send_signal(signal.SIGKILL)  # mid-pass: its heartbeats stop, nothing reports the end
    first.wait()

    spawn_worker("tests.apps.indexing:app", CHAMVI_TEST_COLLECTION=name)

    async def finished() -> CollectionState | None:
        state = await answered_state(chamvi.client, name)  # None until the next worker polls
        ready = state is not None and state.meta is not None and state.meta.status == CollectionStatus.READY
        return state if ready else None

    # the next worker process may take long to start on a loaded machine, and queries fail until it polls
    finishing = f"the next worker finishing the pass over {name!r}"
    state = await eventually(finished, finishing, SLOW_PATIENCE_SECONDS)
    assert state.meta is not None and state.meta.documents == 5
    assert state.passes == 2 and state.error is None  # the lost pass, then the one that finished
    # the generation the lost pass began is the one the next pass finished: no other was started
    assert (state.meta.generation, state.meta.next_generation) == (1, 2)

    async def both_closed() -> list[WorkflowExecution] | None:
        found = await pass_workflows(chamvi.client, name)
        return (
            found
            if [p.status for p in found if p.status != WorkflowExecutionStatus.RUNNING]
            == [
                WorkflowExecutionStatus.FAILED,
                WorkflowExecutionStatus.COMPLETED,
            ]
            else None
        )

    lost, resumed = await eventually(both_closed, f"the lost and the finished pass workflows of {name!r}")
    assert lost.id == running.id and resumed.id.endswith(":2") and state.pass_id == resumed.id
    with pytest.raises(WorkflowFailureError) as raised:
        await chamvi.client.get_workflow_handle(lost.id).result()
    assert "Heartbeat" in str(raised.value.cause)
    result = await chamvi.client.get_workflow_handle(resumed.id, result_type=PassResult).result()
    assert result.meta.generation == 1 and result.stats.read == 5


async def test_a_worker_killed_inside_a_state_upsert_writes_the_item_once(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    # the item is in Qdrant (on disk); the call's result is not recorded
    run_id = await _killed_after(
        spawn_worker, chamvi, "tests.apps.state_crash:app", "remember", events, "upsert-written"
    )

    spawn_worker("tests.apps.state_crash:app")
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)
    assert run.status == RunStatus.COMPLETED, run.error
    written = {line.split()[1] for line in events.read_text().splitlines()}
    assert len(written) == 1  # the redone call found its own write and wrote nothing
    upsert = next(s for s in run.steps if s.tool == "state_refunds_upsert")
    assert upsert.output == {
        "key": "A-1",
        "item": {"customer": "ada@example.com", "amount": 25.0},
        "stored": True,
    }
    listed = next(s for s in run.steps if s.tool == "state_refunds_list").output
    stored = [(i["key"], datetime.fromisoformat(i["updated_at"])) for i in listed["items"]]
    assert stored == [("A-1", datetime.fromisoformat(written.pop()))]


async def test_an_emit_before_a_killed_worker_is_not_sent_again_by_the_retried_call(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    first = spawn_worker("tests.apps.emits:app")
    run_id = (await chamvi.dispatch("announcer")).run_id
    await _until_event(tmp_path / "events.txt", "emitted")
    first.send_signal(signal.SIGKILL)  # out() returned; the tool call never did
    first.wait()

    spawn_worker("tests.apps.emits:app")
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)
    assert run.status == RunStatus.COMPLETED, run.error
    assert (tmp_path / "events.txt").read_text().count("emitted") == 2  # the call ran again
    sent = (tmp_path / "outbox.txt").read_text().splitlines()
    assert len(sent) == 1 and sent[0].startswith(f"team {run_id}:emit:outbox:")


async def test_a_graceful_shutdown_stops_the_channels_before_the_call_in_flight_drains(
    chamvi: ChamviClient, spawn_worker, tmp_path: Path
) -> None:
    events = tmp_path / "events.txt"
    worker = spawn_worker("tests.apps.emits:app")
    await _until_event(events, "channel-started")
    run_id = (await chamvi.dispatch("lingerer")).run_id
    await _until_event(events, "drain-started")
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.wait, 30) == 0
    assert events.read_text().splitlines() == [
        "channel-started",
        "drain-started",
        "channel-stopped",  # nothing new comes in while the call in flight finishes
        "drain-finished",
    ]
    spawn_worker("tests.apps.emits:app")
    run = await asyncio.wait_for(chamvi.wait(run_id), timeout=SLOW_PATIENCE_SECONDS)
    assert run.status == RunStatus.COMPLETED, run.error
