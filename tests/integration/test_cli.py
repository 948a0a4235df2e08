"""The command line against a real Temporal dev server, and `chamvi dev` as a real process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus

from chamvi import (
    App,
    ChamviClient,
    ChamviPlugin,
    FatalToolError,
    RunNotFoundError,
    RunStatus,
    RunView,
    ToolContext,
    define_agent,
    tool,
)
from chamvi._constants import CONCURRENCY_LOCK_WORKFLOW, LOCK_ID_PREFIX
from chamvi._lifecycle import memory_index
from chamvi.artifacts import ArtifactStore
from chamvi.cli import POLL_SECONDS, cli
from chamvi.client import run_id_for
from chamvi.models import RunInput
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.settings import Settings
from examples.support.app import app as support_app
from tests.integration.test_readme_webhooks import tour_block
from tests.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = {
    "query": "how long do refunds take",
    "order_id": "A-1001",
    "amount": 25,
    "to": "ada@example.com",
    "body": "Your refund is on its way.",
}


@pytest.fixture(autouse=True)
def data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example's outbox goes to a tmp folder."""
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    return tmp_path


@pytest.fixture
def chamvi_cli(client: Client, task_queue: str) -> Callable[..., asyncio.Future[Result]]:
    """``await chamvi_cli("runs", "show", run_id)`` against the session server, on this test's queue.

    The CLI runs ``asyncio.run`` in a thread of its own while the worker runs on the test's loop.
    """
    address = client.service_client.config.target_host

    def run(*args: str) -> asyncio.Future[Result]:
        argv = [*args, "--address", address, "--namespace", client.namespace, "--task-queue", task_queue]
        return asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, cli, argv))

    return run


async def until(chamvi: ChamviClient, run_id: str, *statuses: RunStatus) -> RunView:
    async def probe() -> RunView | None:
        run = await chamvi.get_run(run_id)
        return run if run.status in statuses else None

    return await eventually(probe, f"run {run_id} reaching {' or '.join(s.value for s in statuses)}")


async def test_the_example_keeps_its_outbox_in_the_data_folder_its_worker_was_given(
    chamvi_cli, chamvi: ChamviClient, running_worker, data_folder: Path
) -> None:
    """The worker hands its ``--data`` to the app (``DATA_FOLDER``), with no write to ``CHAMVI_DATA``:
    the outbox lands in the worker's folder, not the environment's."""
    given = data_folder / "given"
    plugin = ChamviPlugin(support_app, index=memory_index(), settings=Settings(data=given))
    async with running_worker(plugin):
        dispatched = await chamvi_cli("dispatch", "support", "--payload", json.dumps(PAYLOAD))
        assert dispatched.exit_code == 0, dispatched.output
        run_id = dispatched.stdout.strip()
        await until(chamvi, run_id, RunStatus.WAITING)
        approved = await chamvi_cli("approve", run_id)
        assert approved.exit_code == 0, approved.output
        await until(chamvi, run_id, RunStatus.COMPLETED)
    assert "ada@example.com" in (given / "outbox.jsonl").read_text()
    assert not (data_folder / "outbox.jsonl").exists()


async def test_dispatch_then_show_waiting_then_approve_completes_the_run(
    chamvi_cli, chamvi: ChamviClient, running_worker, data_folder: Path
) -> None:
    async with running_worker(support_app):
        dispatched = await chamvi_cli("dispatch", "support", "--payload", json.dumps(PAYLOAD))
        assert dispatched.exit_code == 0, dispatched.output
        run_id = dispatched.stdout.strip()
        assert re.fullmatch(r"run-support-[0-9a-f]{32}", run_id)
        await until(chamvi, run_id, RunStatus.WAITING)

        shown = await chamvi_cli("runs", "show", run_id)
        assert shown.exit_code == 0, shown.output
        assert "status    waiting" in shown.stdout
        assert "Refund 25.00 on order A-1001?" in shown.stdout
        assert 'input: {"amount": 25.0, "order_id": "A-1001"}' in shown.stdout  # what is approved, whole
        assert f"answer: chamvi approve {run_id}" in shown.stdout

        approved = await chamvi_cli("approve", run_id, "--reason", "looks right")
        assert approved.exit_code == 0, approved.output
        assert approved.stdout.startswith("approved ")
        await until(chamvi, run_id, RunStatus.COMPLETED)

        shown = await chamvi_cli("runs", "show", run_id)
    assert "status    completed" in shown.stdout
    assert "refund_order -> Refunded 25.00 on order A-1001." in shown.stdout
    assert "approved (looks right)" in shown.stdout
    assert "ada@example.com" in (data_folder / "outbox.jsonl").read_text()


async def test_dispatch_channel_address_is_the_runs_address_within_its_channel(
    chamvi_cli, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(support_app):
        dispatched = await chamvi_cli(
            "dispatch",
            "support",
            "--payload",
            json.dumps(PAYLOAD),
            "--channel",
            "console",
            "--channel-address",
            "thread-7",
        )
        assert dispatched.exit_code == 0, dispatched.output
        run = await until(chamvi, dispatched.stdout.strip(), RunStatus.WAITING)
    assert run.trigger.channel == "console" and run.trigger.address == "thread-7"


async def test_show_of_a_run_cancelled_while_waiting_offers_no_approval(
    chamvi_cli, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(support_app):
        dispatched = await chamvi_cli("dispatch", "support", "--payload", json.dumps(PAYLOAD))
        run_id = dispatched.stdout.strip()
        await until(chamvi, run_id, RunStatus.WAITING)
        cancelled = await chamvi_cli("cancel", run_id)
        assert cancelled.exit_code == 0, cancelled.output
        run = await until(chamvi, run_id, RunStatus.CANCELLED)
        shown = await chamvi_cli("runs", "show", run_id)
    assert run.waiting is None
    assert "status    cancelled" in shown.stdout
    assert "waiting" not in shown.stdout and "chamvi approve" not in shown.stdout


async def test_json_output_parses(chamvi_cli, chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(support_app):
        dispatched = await chamvi_cli("dispatch", "support", "--payload", json.dumps(PAYLOAD), "--json")
        assert dispatched.exit_code == 0, dispatched.output
        started = json.loads(dispatched.stdout)
        assert started["created"] is True
        run_id = started["run_id"]
        await until(chamvi, run_id, RunStatus.WAITING)

        shown = await chamvi_cli("runs", "show", run_id, "--json")
        run = RunView.model_validate(json.loads(shown.stdout))
        assert run.run_id == run_id and run.status == RunStatus.WAITING
        assert run.waiting is not None and run.trigger.payload == PAYLOAD

        async def listed_waiting() -> list[dict[str, Any]] | None:
            # the listing reads search attributes, which Temporal indexes a moment later
            listed = await chamvi_cli("runs", "list", "--agent", "support", "--status", "waiting", "--json")
            rows = list(json.loads(listed.stdout))
            return rows if any(row["run_id"] == run_id for row in rows) else None

        rows = await eventually(listed_waiting, f"run {run_id} listed as waiting")
        assert all(row["status"] == "waiting" and row["agent"] == "support" for row in rows)
        await chamvi.cancel(run_id)


async def test_a_redelivered_dispatch_says_it_is_the_existing_run(chamvi_cli, chamvi: ChamviClient) -> None:
    key = f"mail-{uuid.uuid4().hex}"
    first = await chamvi_cli("dispatch", "support", "--idempotency-key", key, "--json")
    again = await chamvi_cli("dispatch", "support", "--idempotency-key", key, "--json")
    assert json.loads(first.stdout)["created"] is True
    assert json.loads(again.stdout) == {"run_id": json.loads(first.stdout)["run_id"], "created": False}
    assert "existing run" in again.stderr
    await chamvi.cancel(json.loads(first.stdout)["run_id"])


async def test_cancel_of_a_waiting_run_settles_it_cancelled(
    chamvi_cli, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(support_app):
        run_id = (await chamvi.dispatch("support", PAYLOAD)).run_id
        await until(chamvi, run_id, RunStatus.WAITING)
        cancelled = await chamvi_cli("cancel", run_id)
        assert cancelled.exit_code == 0, cancelled.output
        await until(chamvi, run_id, RunStatus.CANCELLED)
        shown = await chamvi_cli("runs", "show", run_id)
        again = await chamvi_cli("cancel", run_id)
    assert "status    cancelled" in shown.stdout
    assert again.exit_code != 0
    assert again.output.strip() == f"Error: run {run_id!r} has already ended (cancelled): nothing to cancel"


async def test_dispatch_wait_shows_progress_and_prints_the_outcome(
    chamvi_cli, chamvi: ChamviClient, running_worker
) -> None:
    key = f"wait-{uuid.uuid4().hex}"
    run_id = run_id_for(RunInput(agent="support", idempotency_key=key))
    async with running_worker(support_app):
        waiting = chamvi_cli(
            "dispatch", "support", "--payload", json.dumps(PAYLOAD), "--idempotency-key", key, "--wait"
        )

        async def run_waiting() -> bool | None:
            try:
                if (await chamvi.get_run(run_id)).status == RunStatus.WAITING:
                    return True
            except RunNotFoundError:
                pass
            assert not waiting.done(), waiting.result().output
            return None

        await eventually(run_waiting, f"run {run_id} reaching waiting")
        await asyncio.sleep(POLL_SECONDS * 3)  # the CLI polls: let it see the wait
        await chamvi.approvals.approve(run_id)
        result = await waiting
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == run_id
    assert f"{run_id}: waiting" in result.stderr
    assert f"waiting for approval: Refund 25.00 on order A-1001? (answer with `chamvi approve {run_id}`" in (
        result.stderr
    )
    assert "Done." in result.stdout and "Refunded 25.00 on order A-1001." in result.stdout


@tool
async def give_up() -> str:
    """Fails the run."""
    raise FatalToolError("the tool gave up")


async def test_dispatch_wait_exits_non_zero_when_the_run_fails(chamvi_cli, running_worker) -> None:
    failing = define_agent(name="failing", model="local/demo", instructions="Fail.", tools=[give_up])
    async with running_worker(App(agents=[failing])):
        result = await chamvi_cli("dispatch", "failing", "--wait")
    assert result.exit_code == 1
    run_id = result.stdout.strip()
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: run {run_id} failed: fatal_tool_error: the tool gave up"
    )


async def test_dispatch_of_an_agent_the_worker_does_not_serve_fails_at_once_as_over_http(
    chamvi_cli, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(support_app):
        result = await chamvi_cli("dispatch", "nosuch", "--idempotency-key", "k-1", "--wait")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: unknown agent 'nosuch': this app serves 'digest', 'librarian', 'support', 'ticket-desk'"
    )
    with pytest.raises(RunNotFoundError):  # no run was started
        await chamvi.get_run(run_id_for(RunInput(agent="nosuch", idempotency_key="k-1")))


async def test_dispatch_with_no_worker_up_queues_the_run_and_says_so(
    chamvi_cli, chamvi: ChamviClient, client: Client, task_queue: str
) -> None:
    result = await chamvi_cli("dispatch", "nosuch")
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    assert f"no worker answered on task queue {task_queue!r}" in result.stderr
    assert "queued" in result.stderr
    description = await client.get_workflow_handle(run_id).describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
    await chamvi.cancel(run_id)


@pytest.mark.parametrize("command", [["runs", "show"], ["approve"], ["cancel"]])
async def test_an_unknown_run_is_a_one_line_error(chamvi_cli, client: Client, command: list[str]) -> None:
    result = await chamvi_cli(*command, "run-nobody-0000")
    assert result.exit_code != 0
    address = client.service_client.config.target_host
    assert result.output.strip() == f"Error: no run 'run-nobody-0000' in namespace 'default' at {address}"


@pytest.mark.parametrize("command", [["runs", "show"], ["approve"], ["cancel"]])
async def test_a_concurrency_lock_is_no_run_to_the_cli(
    chamvi_cli, client: Client, task_queue: str, command: list[str]
) -> None:
    handle = await client.start_workflow(
        CONCURRENCY_LOCK_WORKFLOW, id=f"{LOCK_ID_PREFIX}{uuid.uuid4().hex}", task_queue=task_queue
    )
    try:
        result = await chamvi_cli(*command, handle.id)
        description = await handle.describe()
    finally:
        await handle.terminate()
    assert result.exit_code != 0
    address = client.service_client.config.target_host
    assert result.output.strip() == f"Error: no run {handle.id!r} in namespace 'default' at {address}"
    assert description.status == WorkflowExecutionStatus.RUNNING


# -- chamvi dev as a real process -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def chamvi_process(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chamvi.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def start_dev(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``chamvi <command>`` in a process group of its own (so the test can stop all it started),
    its output in ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "chamvi.cli", *command],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def assert_the_handbook_gets_indexed(address: str, env: dict[str, str]) -> None:
    """The worker `chamvi dev` runs starts the example's collection; a search finds the refund policy."""
    deadline = time.monotonic() + 60
    while True:
        listed = chamvi_process("knowledge", "list", "--json", "--address", address, env=env)
        assert listed.returncode == 0, listed.stderr
        rows = {row["name"]: row for row in json.loads(listed.stdout)}
        if rows.get("handbook", {}).get("status") == "ready":
            break
        assert time.monotonic() < deadline, listed.stdout
        time.sleep(0.5)
    assert rows["handbook"]["model"] == "local/all-minilm-l6-v2" and rows["handbook"]["documents"] == 5
    search = ["knowledge", "search", "handbook", "how long do refunds take", "--top-k", "1"]
    found = chamvi_process(*search, "--address", address, env=env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split()[1:4] == ["refunds.md", "Refund", "policy"]


def assert_the_api_answers(api_port: int, run_id: str, token: str) -> None:
    """The HTTP API runs beside the worker, with the dev token kept in the data folder; a managed
    collection is created without CHAMVI_KNOWLEDGE_MODEL (the offline model is the dev default)."""
    base = f"http://127.0.0.1:{api_port}"
    assert httpx.get(f"{base}/openapi.json", timeout=10).status_code == 200
    assert httpx.get(f"{base}/runs/{run_id}", timeout=10).status_code == 401
    assert "chamvi approvals" in httpx.get(f"{base}/ui/", timeout=10).text  # the page needs no token
    shown = httpx.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert shown.status_code == 200 and shown.json()["run_id"] == run_id
    listed = httpx.get(
        f"{base}/knowledge/collections", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert [c["name"] for c in listed.json()["data"]] == ["handbook"]
    created = httpx.post(
        f"{base}/knowledge/collections",
        headers={"Authorization": f"Bearer {token}"},
        json={"name": "tickets"},
        timeout=10,
    )
    assert created.status_code == 201, created.text


def assert_the_approval_link_opens_on_this_api(api_port: int, log: Path) -> None:
    """The run's approval notice on the console links to this API's page, whose API takes its token:
    the worker and the API beside it share the secret generated in the data folder."""
    deadline = time.monotonic() + 30
    while (
        found := re.search(rf"Approve or deny: http://localhost:{api_port}/ui/#answer=(\S+)", log.read_text())
    ) is None:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    shown = httpx.post(
        f"http://127.0.0.1:{api_port}/approvals/view", json={"token": found.group(1)}, timeout=10
    )
    assert shown.status_code == 200 and shown.json()["tool"] == "refund_order", shown.text


def assert_the_tours_ticket_reaches_the_ticket_desk(api_port: int, address: str, env: dict[str, str]) -> None:
    """The tour's signed curl (docs/tutorial.md), as written but for the port, starts a ticket-desk run."""
    script = tour_block().rstrip().replace("http://localhost:3000", f"http://127.0.0.1:{api_port}")
    sent = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert sent.returncode == 0, sent.stderr
    (started,) = json.loads(sent.stdout)["runs"]
    assert started["agent"] == "ticket-desk"
    deadline = time.monotonic() + 60
    while True:
        shown = chamvi_process("runs", "show", started["run_id"], "--json", "--address", address, env=env)
        if shown.returncode == 0 and json.loads(shown.stdout)["status"] == "completed":
            break
        assert time.monotonic() < deadline, shown.stdout + shown.stderr
        time.sleep(0.2)


def assert_the_worker_serves_metrics(address: str) -> None:
    """With CHAMVI_METRICS_ADDRESS, the dev stack's worker serves Temporal's metrics and chamvi's."""
    page = httpx.get(f"http://{address}/metrics", timeout=10).text
    assert re.search(
        r'^chamvi_runs_entered\{[^}]*agent="support"[^}]*status="running"[^}]*\} 1$', page, re.M
    ), page
    assert re.search(r"^temporal_workflow_task_execution_latency_count\{", page, re.M), page


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_chamvi_dev_serves_runs_and_a_signal_leaves_no_process_behind(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    data = tmp_path / "data"
    port, ui_port, api_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHAMVI_"))}
    env["CHAMVI_DATA"] = str(data)
    metrics = f"127.0.0.1:{free_port()}"
    env["CHAMVI_METRICS_ADDRESS"] = metrics
    log = tmp_path / "dev.out"
    command = [
        "dev",
        "--data",
        str(data),
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--api-port",
        str(api_port),
    ]
    dev = start_dev(command, env, log)
    server_pid: int | None = None
    try:
        deadline = time.monotonic() + 60
        while "Ctrl-C to stop" not in log.read_text():
            assert dev.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert f"Metrics at http://{metrics}/metrics." in log.read_text()
        found = re.search(r"Temporal dev server \(pid (\d+)\)", log.read_text())
        assert found, log.read_text()
        server_pid = int(found.group(1))

        address = f"localhost:{port}"
        dispatched = chamvi_process(
            "dispatch",
            "support",
            "--payload",
            json.dumps(PAYLOAD),
            "--channel",
            "console",  # the run's approval notice goes to the console: the dev terminal shows it
            "--address",
            address,
            env=env,
        )
        assert dispatched.returncode == 0, dispatched.stderr
        run_id = dispatched.stdout.strip()
        deadline = time.monotonic() + 60
        while True:
            shown = chamvi_process("runs", "show", run_id, "--json", "--address", address, env=env)
            assert shown.returncode == 0, shown.stderr
            if json.loads(shown.stdout)["status"] in ("waiting", "completed"):
                break
            assert time.monotonic() < deadline, shown.stdout
            time.sleep(0.2)
        assert_the_worker_serves_metrics(metrics)
        assert f"approvals page at http://localhost:{api_port}/ui" in log.read_text()
        if stop_signal == signal.SIGINT:  # once is enough: the real local model embeds the handbook
            assert_the_handbook_gets_indexed(address, env)
            assert_the_api_answers(api_port, run_id, (data / "api-token").read_text().strip())
            assert_the_approval_link_opens_on_this_api(api_port, log)
            assert f"webhooks at http://localhost:{api_port}/channels/tickets/events" in log.read_text()
            assert_the_tours_ticket_reaches_the_ticket_desk(api_port, address, env)

        dev.send_signal(stop_signal)
        assert dev.wait(timeout=45) == 0, log.read_text()
        deadline = time.monotonic() + 10
        while not (gone(server_pid) and group_gone(server_pid)):
            assert time.monotonic() < deadline, f"the Temporal server (pid {server_pid}) outlived chamvi dev"
            time.sleep(0.1)
        assert group_gone(dev.pid)
        assert "stopped" in log.read_text()
        assert (data / "temporal.db").is_file() and (data / "temporal.log").is_file()
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
        if server_pid is not None and not group_gone(server_pid):
            os.killpg(server_pid, signal.SIGKILL)


@tool
async def count_files(ctx: ToolContext) -> int:
    """How many files the run holds."""
    return len(await ctx.artifacts.list())


async def _offline_cli(*args: str) -> Result:
    """A command that needs no Temporal, in a thread of its own (it runs ``asyncio.run``)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def files_app() -> App:
    models = ModelRegistry()
    models.register(
        "scripted/files",
        ScriptedModel(
            [
                call("count_files"),
                lambda request: reply(
                    " ".join(f"{a.artifact.filename}:{len(a.data)}" for a in request.attachments)
                ),
            ]
        ),
    )
    agent = define_agent(name="files", model="scripted/files", instructions="Read.", tools=[count_files])
    return App(agents=[agent], models=models)


async def test_dispatch_attach_stores_the_files_and_artifacts_list_get_and_runs_show_read_them(
    chamvi_cli, client: Client, task_queue: str, data_folder: Path
) -> None:
    (data_folder / "dot.png").write_bytes(b"\x89PNG tiny")
    (data_folder / "terms.txt").write_text("net 30")
    store = ArtifactStore.local(data_folder / "artifacts")  # where the CLI's settings put them
    async with build_worker(client, files_app(), task_queue=task_queue, artifacts=store):
        dispatched = await chamvi_cli(
            "dispatch",
            "files",
            "--attach",
            str(data_folder / "dot.png"),
            "--attach",
            str(data_folder / "terms.txt"),
            "--wait",
        )
        assert dispatched.exit_code == 0, dispatched.output
        shown = await chamvi_cli("runs", "show", run_id := dispatched.output.splitlines()[0])

    assert dispatched.output.splitlines()[-1] == "dot.png:9 terms.txt:6"
    assert f"{run_id}.0000  image/png   9      dot.png" in shown.output
    assert f"{run_id}.0001  text/plain  6      terms.txt" in shown.output
    listed = await _offline_cli("artifacts", "list", run_id, "--json")
    assert [a["filename"] for a in json.loads(listed.output)] == ["dot.png", "terms.txt"]
    target = data_folder / "out.txt"
    got = await _offline_cli("artifacts", "get", f"{run_id}.0001", "-o", str(target))
    assert got.exit_code == 0, got.output
    assert target.read_text() == "net 30"
    missing = await _offline_cli("artifacts", "get", f"{run_id}.0007", "-o", str(target))
    assert missing.exit_code == 1
    assert (
        missing.output
        == f"Error: artifact '{run_id}.0007' is not in the artifact store at {store.location}\n"
    )


async def test_dispatch_attach_over_the_limit_is_a_one_line_error_and_starts_nothing(
    chamvi_cli, data_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAMVI_ATTACHMENT_MAX_BYTES", "10")
    (data_folder / "big.bin").write_bytes(b"x" * 11)

    result = await chamvi_cli("dispatch", "files", "--attach", str(data_folder / "big.bin"))

    assert result.exit_code == 1
    assert result.output == (
        "Error: attachment 'big.bin' is 11 bytes, over the limit of 10 bytes per attachment "
        "(CHAMVI_ATTACHMENT_MAX_BYTES)\n"
    )
    assert not (data_folder / "artifacts").exists()


async def test_the_readme_tours_dispatch_with_a_file_stores_it_before_any_worker_takes_the_run(
    chamvi_cli, data_folder: Path
) -> None:
    dispatched = await chamvi_cli(
        "dispatch",
        "support",
        "--payload",
        '{"query": "refund policy"}',
        "--attach",
        "examples/support/handbook/refunds.md",
    )
    assert dispatched.exit_code == 0, dispatched.output
    run_id = dispatched.output.splitlines()[-1]  # after the notice that no worker is up: it is queued

    listed = await _offline_cli("artifacts", "list", run_id)
    [header, row] = listed.output.splitlines()
    assert header.split() == ["ID", "TYPE", "BYTES", "NAME"]
    size = (ROOT / "examples/support/handbook/refunds.md").stat().st_size
    assert row.split() == [f"{run_id}.0000", "text/markdown", f"{size:,}", "refunds.md"]


async def test_runs_list_with_a_channel_lists_only_the_runs_that_came_through_it(
    chamvi_cli, chamvi: ChamviClient
) -> None:
    channel = f"tickets-{uuid.uuid4().hex[:8]}"
    # no worker: the listing reads the search attributes the dispatch set
    through = (await chamvi.dispatch("support", channel=channel, address="ticket-1")).run_id
    elsewhere = (await chamvi.dispatch("support", channel="console")).run_id

    async def listed() -> list[dict[str, Any]] | None:
        rows = list(json.loads((await chamvi_cli("runs", "list", "--channel", channel, "--json")).stdout))
        return rows if rows else None

    rows = await eventually(listed, f"a run listed under channel {channel!r}")
    assert [(row["run_id"], row["channel"]) for row in rows] == [(through, channel)]
    assert elsewhere not in {row["run_id"] for row in rows}
    for run_id in (through, elsewhere):
        await chamvi.client.get_workflow_handle(run_id).terminate("listed, nothing to run")


async def test_runs_idle_waits_for_the_queued_runs_and_says_when_none_is_left(
    chamvi_cli, chamvi: ChamviClient, client: Client
) -> None:
    agent = f"nobody-serves-{uuid.uuid4().hex[:8]}"
    run_id = (await chamvi.dispatch(agent)).run_id  # no worker: it stays queued

    async def listed() -> bool | None:
        queued = await chamvi.list_runs(agent=agent, status="queued")
        return True if [r.run_id for r in queued] == [run_id] else None

    await eventually(listed, "the queued run in the visibility list")
    busy = await chamvi_cli("runs", "idle", "--timeout", "0.3")
    await client.get_workflow_handle(run_id).terminate("no worker will take it")  # cancelling needs one
    done = await chamvi_cli("runs", "idle", "--agent", agent)
    assert busy.exit_code == 1
    assert busy.output.startswith(f"Error: runs still in progress after 0.3 s: '{run_id}' (queued)")
    assert (done.exit_code, done.output.strip()) == (0, f"no run of agent {agent!r} in progress")


class Verdict(BaseModel):
    label: str
    confidence: float


async def test_runs_show_lists_the_issues_of_a_run_failed_by_its_output_schema(
    chamvi_cli, chamvi: ChamviClient, running_worker
) -> None:
    models = ModelRegistry()
    models.register("scripted/judge", ScriptedModel([reply('{"label": "bug", "confidence": "high"}')]))
    judge = define_agent(name="judge", model="scripted/judge", instructions="Judge.", output=Verdict)
    async with running_worker(App(agents=[judge], models=models)):
        run = await chamvi.wait((await chamvi.dispatch("judge")).run_id)
        shown = await chamvi_cli("runs", "show", run.run_id)  # a worker answers the run's query
    assert run.status == RunStatus.FAILED, run.error
    error = shown.stdout.split("\nerror     validation_error: ", 1)[1]
    assert "\n  confidence: Input should be a valid number, unable to parse string as a number" in error
    assert error.rstrip().endswith("(float_parsing)")
