"""Attachments and ``ctx.artifacts`` through real runs: references in history, bytes in the store."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, ToolContext, define_agent, tool
from chamvi.artifacts import ArtifactStore, Attachment
from chamvi.errors import AttachmentTooLargeError, ChamviValidationError
from chamvi.providers import (
    ChatRequest,
    ModelRegistry,
    OpenAIProvider,
    ScriptedModel,
    ScriptedTurn,
    call,
    reply,
)
from chamvi.runtime import build_worker
from tests.support.openai_server import OpenAIServer, text
from tests.support.s3_server import S3Server

TEN_MIB = 10 * 1024 * 1024
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@tool
async def file_summary(ctx: ToolContext) -> list[str]:
    """Lists the run's files, then puts two of its own."""
    seen = [f"{a.id} {a.media_type} {a.size}" for a in await ctx.artifacts.list()]
    first = await ctx.artifacts.put("text/plain", "summary", filename="summary.txt")
    second = await ctx.artifacts.put("application/json", b'{"pages": 1}')
    return [*seen, first.id, second.id, (await ctx.artifacts.get(first.id)).decode()]


@tool
async def one_more(ctx: ToolContext) -> str:
    """Puts one more file, in a later step."""
    return (await ctx.artifacts.put("text/plain", "later")).id


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore.local(tmp_path / "artifacts")


@pytest.fixture
def chamvi(client: Client, task_queue: str, store: ArtifactStore) -> ChamviClient:
    return ChamviClient(client, task_queue=task_queue, artifacts=store)


Serve = Callable[[App], AbstractAsyncContextManager[None]]


@pytest.fixture
def serve(client: Client, task_queue: str, store: ArtifactStore) -> Serve:
    @asynccontextmanager
    async def run(app: App) -> AsyncIterator[None]:
        async with build_worker(client, app, task_queue=task_queue, artifacts=store):
            yield

    return run


def scripted_app(*turns: ScriptedTurn | Callable[[ChatRequest], ScriptedTurn]) -> tuple[App, ScriptedModel]:
    model = ScriptedModel(list(turns))
    models = ModelRegistry()
    models.register("scripted/reader", model)
    agent = define_agent(
        name="reader", model="scripted/reader", instructions="Read the files.", tools=[file_summary, one_more]
    )
    return App(agents=[agent], models=models), model


async def test_a_10_mib_attachment_runs_through_a_run_whose_history_stays_under_50_kib(
    chamvi: ChamviClient, client: Client, serve: Serve, store: ArtifactStore
) -> None:
    big = bytes(range(256)) * (TEN_MIB // 256)
    app, model = scripted_app(call("file_summary"), call("one_more"), reply("read"))

    async with serve(app):
        dispatched = await chamvi.dispatch(
            "reader", {"ask": "summarise"}, attachments=[Attachment(big, "scan.pdf")]
        )
        run = await chamvi.wait(dispatched.run_id)

    run_id = dispatched.run_id
    assert run.status == RunStatus.COMPLETED, run.error
    history = await client.get_workflow_handle(run_id).fetch_history()
    assert len(history.to_json().encode()) < 50 * 1024
    [attached] = run.trigger.attachments
    assert (attached.id, attached.media_type, attached.filename, attached.size) == (
        f"{run_id}.0000",
        "application/pdf",
        "scan.pdf",
        TEN_MIB,
    )
    assert attached.sha256 == hashlib.sha256(big).hexdigest()
    # every model call read the bytes from the store; the first message names the file for the model
    assert [len(r.attachments) for r in model.requests] == [1, 1, 1]
    assert model.requests[0].attachments[0].data == big
    assert f"{run_id}.0000" in (model.requests[0].messages[1].content or "")
    listing, second_step = (s.output for s in run.steps if s.kind == "tool")
    assert listing == [
        f"{run_id}.0000 application/pdf {TEN_MIB}",
        f"{run_id}.0001",
        f"{run_id}.0002",
        "summary",
    ]
    assert second_step == f"{run_id}.0003"
    assert [a.id for a in await store.list(run_id)] == [f"{run_id}.000{i}" for i in range(4)]


async def test_the_openai_request_carries_an_image_a_pdf_and_a_text_attachment_as_content_parts(
    chamvi: ChamviClient, serve: Serve
) -> None:
    models = ModelRegistry()
    with OpenAIServer() as server:
        server.add(text("a red dot"))
        models = ModelRegistry(
            providers={"openai": OpenAIProvider(api_key="test", base_url=server.url + "/v1").model}
        )
        app = App(
            agents=[define_agent(name="looker", model="openai/vision", instructions="Describe.")],
            models=models,
        )
        async with serve(app):
            dispatched = await chamvi.dispatch(
                "looker",
                "what is this?",
                attachments=[
                    Attachment(PNG, "dot.png"),
                    Attachment(b"%PDF-1.4 tiny", "terms.pdf"),
                    Attachment(b"net 30 days", "note.txt"),
                ],
            )
            run = await chamvi.wait(dispatched.run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    [request] = server.requests
    first_user = request.messages[1]
    assert first_user["role"] == "user"
    envelope, image, pdf, note = first_user["content"]
    assert envelope["type"] == "text" and "what is this?" in envelope["text"]
    assert image == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    }
    assert pdf == {
        "type": "file",
        "file": {
            "filename": "terms.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 tiny").decode(),
        },
    }
    assert note == {"type": "text", "text": "note.txt (text/plain):\nnet 30 days"}


async def test_an_attachment_missing_from_the_store_fails_the_run_with_artifact_not_found(
    chamvi: ChamviClient, serve: Serve, tmp_path: Path
) -> None:
    app, model = scripted_app(reply("never"))
    dispatched = await chamvi.dispatch("reader", attachments=[Attachment(b"gone soon", "x.txt")])
    [data] = [p for p in (tmp_path / "artifacts").rglob("0000")]
    data.unlink()  # no worker has taken the run yet: its first model call finds nothing

    async with serve(app):
        run = await chamvi.wait(dispatched.run_id)

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "artifact_not_found"
    assert f"{dispatched.run_id}.0000" in run.error.message
    assert model.requests == []


async def test_a_redelivered_dispatch_stores_no_attachment_again(
    chamvi: ChamviClient, store: ArtifactStore
) -> None:
    first = await chamvi.dispatch(
        "reader", idempotency_key="mail-1", attachments=[Attachment(b"v1", "a.txt")]
    )
    again = await chamvi.dispatch(
        "reader",
        idempotency_key="mail-1",
        attachments=[Attachment(b"v2", "a.txt"), Attachment(b"x", "b.txt")],
    )

    assert (again.run_id, again.created) == (first.run_id, False)
    [kept] = await store.list(first.run_id)
    assert await store.read(kept.id) == b"v1"


async def test_an_attachment_over_the_limit_is_refused_before_anything_is_stored(
    client: Client, task_queue: str, store: ArtifactStore, tmp_path: Path
) -> None:
    small = ChamviClient(client, task_queue=task_queue, artifacts=store, attachment_max_bytes=1024)

    with pytest.raises(AttachmentTooLargeError, match=r"'big.bin' is 1,025 bytes, over the limit of 1,024"):
        await small.dispatch(
            "reader", attachments=[Attachment(b"ok", "a.txt"), Attachment(b"x" * 1025, "big.bin")]
        )

    assert not any(p.is_file() for p in (tmp_path / "artifacts").rglob("*"))


async def test_an_attachment_whose_media_type_has_parameters_is_refused_before_anything_is_stored(
    chamvi: ChamviClient, tmp_path: Path
) -> None:
    with pytest.raises(ChamviValidationError, match=r"has parameters: .* write 'text/plain'") as refused:
        await chamvi.dispatch(
            "reader",
            attachments=[Attachment(b"ok", "a.txt"), Attachment(b"b", "b.txt", "text/plain; charset=utf-8")],
        )

    assert [i.path for i in refused.value.issues] == [("attachments", 1, "media_type")]
    assert not any(p.is_file() for p in (tmp_path / "artifacts").rglob("*"))


async def test_a_run_on_the_s3_store_reads_its_attachment_and_puts_its_files_there(
    client: Client, task_queue: str
) -> None:
    app, model = scripted_app(call("file_summary"), reply("read"))
    with S3Server() as s3:
        store = ArtifactStore.open(f"s3://{s3.bucket}/runs", **s3.config)
        chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
        async with build_worker(client, app, task_queue=task_queue, artifacts=store):
            dispatched = await chamvi.dispatch("reader", attachments=[Attachment(PNG, "dot.png")])
            run = await chamvi.wait(dispatched.run_id)
        keys = s3.keys()

    run_id = dispatched.run_id
    assert run.status == RunStatus.COMPLETED, run.error
    assert model.requests[0].attachments[0].data == PNG
    assert keys == [f"runs/{run_id}/000{i}{ext}" for i in range(3) for ext in ("", ".json")]
