"""The tour's chat (docs/tutorial.md), run as a reader would: ``chamvi chat support`` over the example app."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner
from temporalio.client import Client

from chamvi import ChamviClient
from chamvi.artifacts import ArtifactStore
from chamvi.cli import cli
from chamvi.plugin import ChamviPlugin
from chamvi.runtime import build_worker
from examples.support.app import app
from tests.knowledge_helpers import new_store, wait_for_meta
from tests.support.docs import blocks

ROOT = Path(__file__).resolve().parents[2]


def tour_chat() -> list[str]:
    """The lines of the tour's chat block after its command: what is written, then what is answered."""
    (block,) = [b.body for b in blocks("tutorial.md", lang="sh") if b.body.startswith("chamvi chat support")]
    return block.splitlines()[1:]


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


async def test_the_tours_follow_up_is_answered_from_the_question_it_follows(
    client: Client, task_queue: str, data: Path
) -> None:
    lines = tour_chat()
    said = [line.removeprefix("you> ") for line in lines if line.startswith("you> ")]
    answers = [line.removesuffix(" ...") for line in lines if not line.startswith("you> ")]
    assert len(said) == len(answers) == 2
    store = new_store()
    artifacts = ArtifactStore.local(data / "artifacts")
    plugin = ChamviPlugin(app, index=store, artifacts=artifacts, start_schedules=False)
    address = client.service_client.config.target_host
    argv = [
        "chat",
        "support",
        "--address",
        address,
        "--namespace",
        client.namespace,
        "--task-queue",
        task_queue,
    ]
    async with build_worker(client, plugin, task_queue=task_queue):
        await wait_for_meta(store, "handbook", "ready")
        chatted = await asyncio.to_thread(
            CliRunner().invoke, cli, argv, input="".join(f"{s}\n" for s in said)
        )
        conversations = ChamviClient(client, task_queue=task_queue, artifacts=artifacts).conversations
        alone = await conversations.send("support", said[1])
        asked_alone = await conversations.wait_turn(alone)

    assert chatted.exit_code == 0, chatted.output
    out = chatted.stdout.splitlines()
    assert out[0::2] == [f"you> {s}" for s in said]
    for answer, expected in zip(out[1::2], answers, strict=True):
        assert answer.startswith(expected), (answer, expected)
    assert "  · knowledge_search(" in chatted.stderr
    # without the first question, the follow-up is about something else (as the tour says)
    assert str(asked_alone.output).startswith("From Refund policy:")
