"""Artifacts over real HTTP: ``POST /runs`` with files, the size limit's 413, and reading them back."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

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
    tokens = make_tokens(
        admin=["*"],
        dispatcher=["runs:dispatch", "runs:read"],
        reader=["artifacts:read"],
        narrow=[f"artifacts:read:{agent}"],
        elsewhere=["artifacts:read:someone-else"],
    )
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
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (422, "validation_error")
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


@dataclass
class FolderStore:
    """The API over artifacts in a folder, the embedded default, with one run's two artifacts in it."""

    url: str
    reader: Token
    run_id: str


@pytest.fixture
async def folder_store(client: Client, task_queue: str, tmp_path: Path) -> AsyncIterator[FolderStore]:
    store = ArtifactStore.local(tmp_path / "artifacts")
    run_id = f"run-reader-{uuid.uuid4().hex}"
    await store.put(run_id, 0, "text/html", b"<script>alert(1)</script>", "page.html")
    await store.put(run_id, 1, "text/plain", b"second")
    tokens = make_tokens(reader=["artifacts:read", "runs:read"])
    runs = ChamviClient(client, task_queue=task_queue, artifacts=store)
    async with serving(create_api(tokens=list(tokens.values()), managed=None, runs=runs)) as url:
        yield FolderStore(url, tokens["reader"], run_id)


MALFORMED = (422, "validation_error")  # the route's own check, as the document states it
ABSENT = (404, "artifact_not_found")


@pytest.mark.parametrize(
    ("artifact_id", "answer"),
    [
        ("...0000", MALFORMED),
        ("%2e%2e.0000", MALFORMED),
        ("%2e.0000", MALFORMED),
        ("x" * 1000 + ".0000", MALFORMED),  # 1 005 characters: no path segment of a folder holds it
        ("{run}.00000", MALFORMED),  # not canonical: it must not read {run}.0000
        ("{run}.00001", MALFORMED),
        ("{run}.0", MALFORMED),
        ("{run}.", MALFORMED),
        (".0000", MALFORMED),  # shorter than any id
        ("{run}.0002", ABSENT),
        ("{run}.10000", ABSENT),
        ("run-elsewhere.0000", ABSENT),
    ],
)
async def test_an_odd_artifact_id_answers_404_or_422_never_500(
    folder_store: FolderStore, artifact_id: str, answer: tuple[int, str]
) -> None:
    async with httpx.AsyncClient(base_url=folder_store.url, headers=bearer(folder_store.reader)) as http:
        response = await http.get(f"/artifacts/{artifact_id.format(run=folder_store.run_id)}")
    assert (response.status_code, response.json()["error"]["code"]) == answer, response.text


async def test_a_run_id_too_long_for_a_folder_answers_422_before_the_store_is_read(
    folder_store: FolderStore,
) -> None:
    async with httpx.AsyncClient(base_url=folder_store.url, headers=bearer(folder_store.reader)) as http:
        response = await http.get(f"/runs/{'r' * 300}/artifacts")  # 300 bytes: no folder name holds it
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (422, "validation_error"), response.text
    assert [issue["path"] for issue in error["issues"]] == [["path", "run_id"]]


async def test_an_unknown_runs_artifacts_answer_404_like_the_run(folder_store: FolderStore) -> None:
    async with httpx.AsyncClient(base_url=folder_store.url, headers=bearer(folder_store.reader)) as http:
        artifacts = await http.get("/runs/run-reader-unknown/artifacts")
        run = await http.get("/runs/run-reader-unknown")
        # this run's history is gone (never started here), its artifacts are not: they still list
        kept = await http.get(f"/runs/{folder_store.run_id}/artifacts")
    assert (artifacts.status_code, artifacts.json()["error"]["code"]) == (404, "run_not_found")
    assert artifacts.json()["error"]["code"] == run.json()["error"]["code"]
    run_id = folder_store.run_id
    assert [a["id"] for a in kept.json()["data"]] == [f"{run_id}.0000", f"{run_id}.0001"]


async def test_an_artifact_is_served_with_nosniff_so_a_browser_never_runs_it(
    folder_store: FolderStore,
) -> None:
    async with httpx.AsyncClient(base_url=folder_store.url, headers=bearer(folder_store.reader)) as http:
        page = await http.get(f"/artifacts/{folder_store.run_id}.0000")
    assert page.status_code == 200 and page.content == b"<script>alert(1)</script>"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["content-disposition"].startswith("attachment;")


async def test_artifacts_read_narrowed_to_an_agent_reads_that_agents_runs_only(stack: Stack) -> None:
    files = [("attachments", ("invoice.pdf", b"%PDF-1.4 invoice", "application/pdf"))]
    async with stack.http("dispatcher") as http:
        run_id = (await http.post("/runs", data={"agent": stack.agent}, files=files)).json()["run_id"]
    await stack.chamvi.wait(run_id)
    answers = {}
    for token in ("narrow", "elsewhere"):
        async with stack.http(token) as http:
            answers[token] = (
                await http.get(f"/runs/{run_id}/artifacts"),
                await http.get(f"/artifacts/{run_id}.0000"),
                await http.get("/artifacts/run-unknown-0.0000"),
            )
    listed, body, unknown = answers["narrow"]
    assert [a["id"] for a in listed.json()["data"]] == [f"{run_id}.0000"]
    assert body.content == b"%PDF-1.4 invoice"
    # neither another agent's run nor an unknown one says which agent it is, or whether it exists
    refused = [*answers["elsewhere"], unknown]
    assert [(r.status_code, r.json()["error"]["code"]) for r in refused] == [(403, "forbidden")] * 4
    assert {r.json()["error"]["message"] for r in refused} == {
        "token 'elsewhere' may read the artifacts of its agents' runs only (artifacts:read:<agent>), "
        "and this run is not one of them"
    } | {
        "token 'narrow' may read the artifacts of its agents' runs only (artifacts:read:<agent>), "
        "and this run is not one of them"
    }
