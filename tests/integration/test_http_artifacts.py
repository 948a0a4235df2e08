"""Artifacts over real HTTP: ``POST /runs`` with files, the size limit's 413, and reading them back."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, define_agent
from chamvi.artifacts import ArtifactStore
from chamvi.http import Token, create_api
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, reply
from chamvi.runtime import build_worker
from tests.support.http_api import bearer, make_tokens, serving

LIMIT = 64 * 1024


def describe_files(request: ChatRequest) -> ScriptedTurn:
    return reply(", ".join(f"{a.artifact.filename}:{len(a.data)}" for a in request.attachments))


@dataclass
class Stack:
    url: str
    tokens: dict[str, Token]
    agent: str
    chamvi: ChamviClient

    def http(self, token: str = "admin") -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=bearer(self.tokens[token]), timeout=30)


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    agent = f"reader-{uuid.uuid4().hex[:8]}"
    models = ModelRegistry()
    models.register("scripted/files", ScriptedModel([describe_files], repeat_last=True))
    app = App(agents=[define_agent(name=agent, model="scripted/files", instructions="Read.")], models=models)
    store = ArtifactStore.memory()
    tokens = make_tokens(admin=["*"], dispatcher=["runs:dispatch", "runs:read"], reader=["artifacts:read"])
    runs = ChamviClient(client, task_queue=task_queue, artifacts=store, attachment_max_bytes=LIMIT)
    api = create_api(tokens=list(tokens.values()), managed=None, runs=runs, agents=list(app.agents))
    async with build_worker(client, app, task_queue=task_queue, artifacts=store), serving(api) as url:
        yield Stack(url, tokens, agent, runs)


async def test_a_multipart_dispatch_stores_its_files_and_the_model_reads_them(stack: Stack) -> None:
    files = [
        ("attachments", ("invoice.pdf", b"%PDF-1.4 invoice", "application/pdf")),
        ("attachments", ("notes.txt", b"net 30", "application/octet-stream")),
    ]
    form = {"agent": stack.agent, "payload": json.dumps({"supplier": "acme"}), "idempotency_key": "m-1"}
    async with stack.http("dispatcher") as http:
        created = await http.post("/runs", data=form, files=files)
        again = await http.post("/runs", data=form, files=files)
    assert created.status_code == 202, created.text
    run_id = created.json()["run_id"]
    assert (again.status_code, again.json()["run_id"]) == (200, run_id)

    run = await stack.chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "invoice.pdf:16, notes.txt:6"
    assert run.trigger.payload == {"supplier": "acme"}
    assert [(a.filename, a.media_type) for a in run.trigger.attachments] == [
        ("invoice.pdf", "application/pdf"),
        ("notes.txt", "text/plain"),  # a generic type gives way to the name's
    ]

    async with stack.http("reader") as http:
        listed = await http.get(f"/runs/{run_id}/artifacts")
        body = await http.get(f"/artifacts/{run_id}.0000")
        missing = await http.get(f"/artifacts/{run_id}.0009")
        malformed = await http.get("/artifacts/not-an-id")
        refused = await http.post("/runs", data={"agent": stack.agent}, files=files)
    async with stack.http("dispatcher") as http:
        not_reader = await http.get(f"/runs/{run_id}/artifacts")
    assert [a["id"] for a in listed.json()["data"]] == [f"{run_id}.0000", f"{run_id}.0001"]
    assert body.content == b"%PDF-1.4 invoice"
    assert body.headers["content-type"] == "application/pdf"
    assert "invoice.pdf" in body.headers["content-disposition"]
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "artifact_not_found")
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (422, "invalid_input")
    assert refused.status_code == 403
    assert (not_reader.status_code, not_reader.json()["error"]["code"]) == (403, "forbidden")


async def test_an_attachment_too_large_or_with_media_type_parameters_starts_nothing(stack: Stack) -> None:
    files = [("attachments", ("scan.tiff", b"x" * (LIMIT + 1), "image/tiff"))]
    async with stack.http("dispatcher") as http:
        response = await http.post("/runs", data={"agent": stack.agent}, files=files)
        small = [("a", ("a.txt", b"a", "text/plain"))]
        bad_payload = await http.post("/runs", data={"agent": stack.agent, "payload": "{oops"}, files=small)
        unknown_field = await http.post(
            "/runs",
            data={"agent": stack.agent, "colour": "red"},
            files=[("a", ("a.txt", b"a", "text/plain"))],
        )
        with_charset = await http.post(
            "/runs",
            data={"agent": stack.agent},
            files=[
                ("a", ("a.pdf", b"%PDF", "application/pdf")),
                ("b", ("b.txt", b"b", "text/plain; charset=utf-8")),
            ],
        )

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "attachment_too_large"
    assert "'scan.tiff' is 65,537 bytes, over the limit of 65,536 bytes" in error["message"]
    assert (bad_payload.status_code, bad_payload.json()["error"]["code"]) == (422, "invalid_input")
    assert "form field 'payload' is not JSON" in bad_payload.json()["error"]["message"]
    assert (unknown_field.status_code, unknown_field.json()["error"]["code"]) == (422, "validation_error")
    assert "colour" in unknown_field.json()["error"]["message"]
    assert [i["path"] for i in unknown_field.json()["error"]["issues"]] == [["colour"]]
    charset = with_charset.json()["error"]
    assert (with_charset.status_code, charset["code"]) == (422, "validation_error")
    assert "'text/plain; charset=utf-8' has parameters" in charset["message"]
    assert "write 'text/plain'" in charset["message"]
    assert [i["path"] for i in charset["issues"]] == [["attachments", 1, "media_type"]]
    assert (await stack.chamvi.list_runs(agent=stack.agent)) == []
