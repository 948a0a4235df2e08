"""``chamvi chat`` and ``chamvi conversations`` against a real worker and the session's Temporal server."""

from __future__ import annotations

import asyncio
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
from chamvi.runtime import build_worker
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
    app = make_app()
    tokens = make_tokens(reader=["runs:read"])
    chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
    api = create_api(tokens=list(tokens.values()), managed=None, runs=chamvi, events=app.events)
    async with build_worker(client, app, task_queue=task_queue, artifacts=store), serving(api) as url:
        chatted = await run_cli(
            "chat", "chat", "--api", url, "--token", tokens["reader"].value, input="stream it\n"
        )

    assert chatted.exit_code == 0, chatted.output
    # the words came as deltas (each followed by a space); the recorded step is not printed again
    assert chatted.stdout == "you> stream it\nre: stream it | earlier: [] \n"
