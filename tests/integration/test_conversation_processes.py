"""Conversations across real failures: workers SIGKILLed mid-turn, and the whole stack killed and
started again over its persisted data."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from chamvi import ChamviClient, RunStatus, SentMessage
from chamvi._dev import DevServer, DevServerConfig, find_temporal
from chamvi.artifacts import ArtifactStore
from chamvi.conversations import ConversationStore
from chamvi.errors import UnavailableError
from chamvi.models.conversations import ConversationView
from tests.polling import eventually, until_status

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.chat:app"


class Workers:
    """Worker subprocesses of the chat app on one task queue, each killable with SIGKILL."""

    def __init__(self, address: str, task_queue: str, folder: Path) -> None:
        self.address = address
        self.task_queue = task_queue
        self.folder = folder
        self.processes: list[subprocess.Popen[bytes]] = []

    def spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "CHAMVI_TEST_DIR": str(self.folder), "CHAMVI_DATA": str(self.folder / "data")}
        command = [sys.executable, "worker.py", "--app", APP, "--address", self.address]
        process = subprocess.Popen(
            [*command, "--task-queue", self.task_queue],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(self.folder / f"worker{len(self.processes)}.log").open("wb"),
        )
        self.processes.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.processes if p.poll() is None]

    def stop(self) -> None:
        for process in self.alive():
            self.kill(process)


@pytest.fixture
def workers(temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path) -> Iterator[Workers]:
    spawned = Workers(temporal_env.client.service_client.config.target_host, task_queue, tmp_path)
    yield spawned
    spawned.stop()


def _store(folder: Path) -> ArtifactStore:
    return ArtifactStore.local(folder / "data" / "artifacts")


async def _events(folder: Path, event: str) -> None:
    path = folder / "events.txt"

    async def probe() -> bool | None:
        return True if path.exists() and event in path.read_text() else None

    await eventually(probe, repr(event))


async def test_a_worker_killed_mid_turn_leaves_the_turn_completed_once_and_its_answer_recorded_once(
    client: Client, workers: Workers, task_queue: str, tmp_path: Path
) -> None:
    chat = ChamviClient(client, task_queue=task_queue, artifacts=_store(tmp_path))
    first = workers.spawn()
    sent = await chat.conversations.send("chat", "slow question", conversation="killed")
    await _events(tmp_path, "lookup-started")
    workers.kill(first)  # the turn's tool call is under way
    workers.spawn()
    run = await asyncio.wait_for(chat.conversations.wait_turn(sent), timeout=90)

    assert run.status == RunStatus.COMPLETED
    assert run.output == "re: slow question | earlier: [] | tools: ['found slow question']"
    assert [s.tool for s in run.steps if s.kind == "tool"] == ["slow_lookup"]
    store = ConversationStore(_store(tmp_path))
    head = await store.head("chat", "killed")
    assert head is not None and head.turns == 1
    listed = list((tmp_path / "data" / "artifacts" / "conversations" / "chat" / "killed" / "turns").iterdir())
    assert [p.name for p in listed] == ["00000000.json"]
    assert (await store.turn("chat", "killed", 0)).answer == run.output


@pytest.mark.timeout(300)
async def test_twenty_conversations_of_ten_turns_through_worker_kills_answer_each_message_once_in_order(
    client: Client, workers: Workers, task_queue: str, tmp_path: Path
) -> None:
    store = ConversationStore(_store(tmp_path))
    chat = ChamviClient(client, task_queue=task_queue, artifacts=_store(tmp_path))
    conversations = [f"load-{n:02d}" for n in range(20)]
    workers.spawn()
    workers.spawn()

    async def send(conversation: str) -> list[SentMessage]:
        # one after the other, so arrival order is the message order; the turns run meanwhile
        return [
            await chat.conversations.send(
                "chat", f"m{i}", conversation=conversation, message_id=f"{conversation}-{i}"
            )
            for i in range(10)
        ]

    sent = await asyncio.gather(*(send(c) for c in conversations))
    done = asyncio.ensure_future(asyncio.gather(*(chat.conversations.wait_turn(m[-1]) for m in sent)))
    chance = random.Random(23)
    kills = 0
    while not done.done() and kills < 6:
        await asyncio.wait([done], timeout=chance.uniform(1.0, 2.5))
        if done.done():
            break
        workers.kill(chance.choice(workers.alive()))
        workers.spawn()
        kills += 1
    await asyncio.wait_for(done, timeout=240)
    assert kills >= 3  # the turns did not all end before the kills began

    for conversation, messages in zip(conversations, sent, strict=True):
        assert [m.turn for m in messages] == list(range(10))
        head = await store.head("chat", conversation)
        assert head is not None and head.turns == 10, conversation
        records = await store.turns("chat", conversation, 0, 10)
        assert [r.message_id for r in records] == [f"{conversation}-{i}" for i in range(10)]
        assert [r.answer for r in records] == [
            f"re: m{i} | earlier: {[f'm{j}' for j in range(i)]}" for i in range(10)
        ]
        assert {r.status for r in records} == {RunStatus.COMPLETED}
        with pytest.raises(Exception, match="not in the conversation store"):
            await store.turn("chat", conversation, 10)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _started(config: DevServerConfig) -> DevServer:
    server = DevServer(config)
    server.start()
    await server.wait_ready()
    return server


def _crash(server: DevServer) -> None:
    assert server.pid is not None
    os.killpg(server.pid, signal.SIGKILL)
    server.stop()


async def test_a_full_stack_restart_loses_no_message(task_queue: str, tmp_path: Path) -> None:
    config = DevServerConfig(data=tmp_path / "temporal", port=_free_port(), ui_port=_free_port())
    server = await _started(config)
    workers = Workers(config.address, task_queue, tmp_path)
    try:
        client = await Client.connect(config.address, data_converter=pydantic_data_converter)
        chat = ChamviClient(client, task_queue=task_queue, artifacts=_store(tmp_path))
        workers.spawn()
        asking = await chat.conversations.send("chat", "refund my order", conversation="restart")
        await chat.conversations.turn_started(asking.run_id)
        await until_status(chat, asking.run_id, RunStatus.WAITING)
        queued = [await chat.conversations.send("chat", f"q{i}", conversation="restart") for i in range(3)]

        workers.stop()  # the whole stack dies at once: workers and the Temporal server
        _crash(server)
        server = await _started(config)
        client = await Client.connect(config.address, data_converter=pydantic_data_converter)
        chat = ChamviClient(client, task_queue=task_queue, artifacts=_store(tmp_path))
        workers.spawn()

        async def answered() -> ConversationView | None:
            try:
                return await chat.conversations.get("chat", "restart")
            except (UnavailableError, RPCError):  # the server or the new worker is not up yet
                return None

        view = await eventually(answered, "the restarted worker answering the conversation's query")
        assert [q.message.text for q in view.queue] == ["q0", "q1", "q2"]

        async def approved() -> bool | None:
            try:
                await chat.approvals.approve(asking.run_id, approved=True)
            except RPCError:  # the run's worker is not polling its queue yet
                return None
            return True

        await eventually(approved, "the approval reaching the restarted run")
        runs = [
            await asyncio.wait_for(chat.conversations.wait_turn(m), timeout=90) for m in [asking, *queued]
        ]
    finally:
        workers.stop()
        server.stop()

    assert [r.output for r in runs] == [
        "re: refund my order | earlier: [] | tools: ['refunded 25.00']",
        "re: q0 | earlier: ['refund my order']",
        "re: q1 | earlier: ['refund my order', 'q0']",
        "re: q2 | earlier: ['refund my order', 'q0', 'q1']",
    ]


async def test_a_dev_data_folder_from_before_conversations_gets_the_new_search_attribute(
    tmp_path: Path,
) -> None:
    config = DevServerConfig(data=tmp_path / "temporal", port=_free_port(), ui_port=_free_port())
    config.data.mkdir()
    # a database made by a chamvi that registered only one of today's attributes
    command = [find_temporal(), "server", "start-dev", "--db-filename", str(config.db_path)]
    command += [
        "--port",
        str(config.port),
        "--ui-port",
        str(config.ui),
        "--search-attribute",
        "ChamviAgent=Keyword",
    ]
    first = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        client = await _connected(config.address)
        names = await _attributes(client)
        assert "ChamviAgent" in names and "ChamviConversation" not in names
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        first.wait()
    server = await _started(config)  # `chamvi dev` over the same folder
    try:
        names = await _attributes(await _connected(config.address))
    finally:
        server.stop()
    assert {"ChamviAgent", "ChamviStatus", "ChamviConversation", "ChamviTainted"} <= names


async def _connected(address: str) -> Client:
    async def probe() -> Client | None:
        try:
            return await Client.connect(address)
        except RuntimeError:
            return None

    return await eventually(probe, f"a Temporal server at {address}")


async def _attributes(client: Client) -> set[str]:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    async def probe() -> set[str] | None:
        try:
            answer = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=client.namespace)
            )
        except Exception:
            return None
        return set(answer.custom_attributes) or None

    return await eventually(probe, "the search attributes")
