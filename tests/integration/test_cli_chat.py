"""``chamvi chat`` and ``chamvi conversations`` against a real worker and the session's Temporal server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from temporalio.client import Client

from chamvi import ChamviClient
from chamvi.artifacts import ArtifactStore
from chamvi.cli import cli
from chamvi.http import create_api
from chamvi.runtime import build_worker, local_plugin
from tests.apps.chat import make_app
from tests.support.http_api import make_tokens, serving

Chat = Callable[..., "asyncio.Future[Result]"]


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's data folder (its artifact store, so the transcripts); no `chamvi dev` token in it."""
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    return tmp_path


@pytest.fixture
def run_cli(client: Client, task_queue: str) -> Chat:
    address = client.service_client.config.target_host

    def run(*args: str, input: str | None = None) -> asyncio.Future[Result]:
        argv = [*args, "--address", address, "--namespace", client.namespace, "--task-queue", task_queue]
        return asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, cli, argv, input=input))

    return run


def _cid() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


async def test_a_piped_chat_answers_each_line_and_the_follow_up_sees_the_first(
    client: Client, task_queue: str, data: Path, run_cli: Chat
) -> None:
    conversation = _cid()
    store = ArtifactStore.local(data / "artifacts")
    async with build_worker(client, make_app(), task_queue=task_queue, artifacts=store):
        chatted = await run_cli(
            "chat",
            "chat",
            "--conversation",
            conversation,
            input="Can I get a refund?\nand how long does that take?\n",
        )
        continued = await run_cli("chat", "chat", "--conversation", conversation, input="and then?\n")
        listed = await run_cli("conversations", "list", "chat")
        shown = await run_cli("conversations", "show", "chat", conversation, "--limit", "2")

    assert chatted.exit_code == 0, chatted.output
    assert chatted.stdout.splitlines() == [
        "you> Can I get a refund?",
        "re: Can I get a refund? | earlier: []",
        "you> and how long does that take?",
        "re: and how long does that take? | earlier: ['Can I get a refund?']",
    ]
    assert f"conversation {conversation} with chat" in chatted.stderr
    assert continued.exit_code == 0, continued.output
    assert continued.stdout.splitlines() == [
        "you> Can I get a refund?",
        "agent> re: Can I get a refund? | earlier: []",
        "you> and how long does that take?",
        "agent> re: and how long does that take? | earlier: ['Can I get a refund?']",
        "you> and then?",
        "re: and then? | earlier: ['Can I get a refund?', 'and how long does that take?']",
    ]
    assert listed.exit_code == 0 and conversation in listed.stdout
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == [
        "[1] you> and how long does that take?",
        "[1] agent> re: and how long does that take? | earlier: ['Can I get a refund?']",
        "[2] you> and then?",
        "[2] agent> re: and then? | earlier: ['Can I get a refund?', 'and how long does that take?']",
    ]
    assert "--before 1" in shown.stderr


async def test_a_waiting_approval_is_asked_inline_and_each_tool_call_is_one_line(
    client: Client, task_queue: str, data: Path, run_cli: Chat
) -> None:
    store = ArtifactStore.local(data / "artifacts")
    async with build_worker(client, make_app(), task_queue=task_queue, artifacts=store):
        chatted = await run_cli("chat", "chat", input="refund my order\ny\nrefund again\nn\n")

    assert chatted.exit_code == 0, chatted.output
    assert chatted.stdout.splitlines() == [
        "you> refund my order",
        "Refund 25.00 on order A-1001? [y/N] y",
        "re: refund my order | earlier: [] | tools: ['refunded 25.00']",
        "you> refund again",
        "Refund 25.00 on order A-1001? [y/N] n",
        "re: refund again | earlier: ['refund my order'] | tools: ['not refunded: denied']",
    ]
    tool_lines = [line for line in chatted.stderr.splitlines() if line.startswith("  · ")]
    assert tool_lines == [
        '  · refund_order({"order_id": "A-1001", "amount": 25.0}) -> refunded 25.00',
        '  · refund_order({"order_id": "A-1001", "amount": 25.0}) -> not refunded: denied',
    ]


async def test_a_chat_through_the_api_streams_the_answer_once(
    client: Client, task_queue: str, data: Path, run_cli: Chat
) -> None:
    store = ArtifactStore.local(data / "artifacts")
    plugin = local_plugin(make_app(), artifacts=store)
    tokens = make_tokens(reader=["runs:read"])
    chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
    api = create_api(tokens=list(tokens.values()), managed=None, runs=chamvi, events=plugin.runtime.events)
    async with build_worker(client, plugin, task_queue=task_queue), serving(api) as url:
        chatted = await run_cli(
            "chat", "chat", "--api", url, "--token", tokens["reader"].value, input="stream it\n"
        )

    assert chatted.exit_code == 0, chatted.output
    # the words came as deltas (each followed by a space); the recorded step is not printed again
    assert chatted.stdout == "you> stream it\nre: stream it | earlier: [] \n"


async def test_a_chat_at_a_terminal_prompts_answers_asks_the_approval_and_ends_at_ctrl_d(
    client: Client, task_queue: str, data: Path
) -> None:
    store = ArtifactStore.local(data / "artifacts")
    leader, follower = os.openpty()
    address = client.service_client.config.target_host
    command = [sys.executable, "-m", "chamvi.cli", "chat", "chat", "--address", address]
    command += ["--namespace", client.namespace, "--task-queue", task_queue]
    async with build_worker(client, make_app(), task_queue=task_queue, artifacts=store):
        process = subprocess.Popen(
            command,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env={**os.environ, "CHAMVI_DATA": str(data)},
        )
        os.close(follower)
        screen = Screen(leader)
        try:
            await screen.wait_for("you> ")
            os.write(leader, b"refund my order\n")
            await screen.wait_for("Refund 25.00 on order A-1001? [y/N] ")
            os.write(leader, b"y\n")
            await screen.wait_for("tools: ['refunded 25.00']")
            await screen.wait_for("you> ", after="tools:")
            os.write(leader, b"\x04")  # Ctrl-D: the end of input
            assert await asyncio.to_thread(process.wait, 30) == 0
        finally:
            if process.poll() is None:
                process.kill()
            os.close(leader)
    assert "  · refund_order(" in screen.text
    assert "conversation c-" in screen.text


class Screen:
    """What a terminal shows of a process writing to a pseudo-terminal."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""

    async def wait_for(self, wanted: str, after: str | None = None, seconds: float = 60) -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            start = self.text.rfind(after) if after is not None else 0
            if start >= 0 and wanted in self.text[start:]:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{wanted!r} never showed; the terminal shows:\n{self.text}")
            readable, _, _ = await asyncio.to_thread(select.select, [self.fd], [], [], 0.2)
            if readable:
                with contextlib.suppress(OSError):  # the process closed the terminal
                    self.text += os.read(self.fd, 4096).decode(errors="replace").replace("\r\n", "\n")
