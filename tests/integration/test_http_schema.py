"""Schemathesis against ``/openapi.json``: the API answers as its own document says, for every operation.

The whole API runs for real (uvicorn on loopback, a worker, the session's Temporal, knowledge, runs and
artifact routes, a folder artifact store) with a token holding every permission. Schemathesis' stateless
phases run on each operation: the document's examples, coverage (each parameter's edges, an undeclared
method, OPTIONS) and a few drawn requests, valid and invalid, deterministic. No answer may be a 5xx or
outside the document, a valid request may not be refused (a 422 only where a rule is beyond JSON
Schema, named in ``CONFIG``), and a 405 or an OPTIONS answer lists every method of the path.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.pytest._test_builder import build_operation_test
from temporalio.client import Client

from chamvi import App, define_agent, webhook_channel
from chamvi.artifacts import ArtifactStore
from chamvi.http import build_api
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from tests.knowledge_helpers import CountingEmbedder, knowledge_worker, new_store
from tests.support.http_api import bearer, make_tokens, serving

MEANINGFUL_422 = ["2xx", "401", "403", "404", "409", "422"]
"""What a request of valid shape may get from a route that checks meaning too: 422 names the problem."""
CONFIG: dict[str, Any] = {
    # stateless phases only; the fuzzing phase draws valid and invalid requests alike
    "phases": {"stateful": {"enabled": False}},
    # the coverage phase (about 1 500 requests, each parameter's edges) is most of the run; fuzzing
    # adds a few drawn requests per operation, the same ones every run
    "generation": {"max-examples": 5, "deterministic": True, "mode": "all"},
    "operations": [
        {
            # a cron's meaning, a time zone's name and the server's shortest interval are beyond a
            # JSON Schema: a schedule of valid shape may still be 422 invalid_schedule, which names why
            "include-path": "/schedules",
            "include-method": "POST",
            "checks": {"positive_data_acceptance": {"expected-statuses": MEANINGFUL_422}},
        },
        {
            # an agent's tools, MCP servers and model must be the App's, which its document leaves open
            "include-path": "/agents/{name}",
            "include-method": "PUT",
            "checks": {"positive_data_acceptance": {"expected-statuses": MEANINGFUL_422}},
        },
    ],
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    positive_data_acceptance,
    unsupported_method,
    allow_header_conformance,
]


def make_app(declared: str) -> App:
    async def handbook() -> AsyncIterator[dict[str, str]]:
        yield {"id": "refunds", "content": "Refunds are paid within 30 days."}

    embedders = EmbeddingRegistry()
    embedders.register("test/schema", CountingEmbedder(ref="test/schema"))
    models = ModelRegistry()
    models.register("scripted/support", ScriptedModel([reply("done")], repeat_last=True))
    return App(
        # "support" is the example agent of the document: its examples start real runs
        agents=[define_agent(name="support", model="scripted/support", instructions="Help.")],
        # the default model of agents defined over HTTP: a definition that names none is still valid
        model="scripted/support",
        models=models,
        embedders=embedders,
        collections=[
            knowledge_collection(declared, model="test/schema", sources=[define_source(documents=handbook)])
        ],
        # a public route (signed, not token-bearing): generated requests must get 401/404/422, never a 5xx
        channels=[webhook_channel("hooks", secret="schema-secret-0123456789")],
    )


def _described(error: BaseException) -> str:
    """The error with what it groups: Hypothesis's "unreliable results" hides the first call's failure."""
    inner = getattr(error, "exceptions", None) or ()
    return "; ".join([str(error), *(f"{type(e).__name__}: {_described(e)}" for e in inner)])


def run_schemathesis(
    spec: dict[str, Any], base_url: str, headers: dict[str, str]
) -> tuple[list[str], Counter[str]]:
    """Runs every operation's stateless phases; returns the failures and the answers by operation and status.

    The phases are schemathesis' own (examples, coverage, fuzzing, in both generation modes), built
    per operation as its pytest plugin builds them, and each answer meets every check in ``CHECKS``.
    """
    config = schemathesis.config.SchemathesisConfig.from_dict(CONFIG)
    schema = schemathesis.openapi.from_dict(spec, config=config)
    failures: list[str] = []
    answers: Counter[str] = Counter()
    with requests.Session() as session:
        operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
        # streams first: a conversation's stream goes on while the conversation does, so it is asked
        # before any message starts one (none exists yet: 404); deletes last, documents before
        # collections, so the examples find what they name
        operations.sort(
            key=lambda op: (not op.path.endswith("/events"), op.method.upper() == "DELETE", -len(op.path))
        )
        for operation in operations:
            def check(case: Any) -> None:
                response = case.call_and_validate(
                    base_url=base_url, session=session, headers=headers, checks=CHECKS, timeout=30
                )
                mode = case.meta.generation.mode.value if case.meta is not None else "explicit"
                answers[f"{case.operation.label} {mode} {response.status_code}"] += 1

            test = build_operation_test(
                config=schema.config,
                operation=operation,
                test_func=check,
                given_kwargs={},
                feedback=FeedbackSources(),
            )
            try:
                test()
            except (Exception, FailureGroup) as error:  # keep going: report every operation
                failures.append(f"{operation.label}: {_described(error)}")
    return failures, answers


def statuses(answers: Counter[str]) -> set[str]:
    return {key.rsplit(" ", 1)[1] for key in answers}


# about 1 700 requests: a minute and a half on a quiet machine, up to twice that on a loaded one
@pytest.mark.timeout(360)
async def test_no_generated_request_gets_a_5xx_or_an_answer_outside_the_schema(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    declared = f"handbook-{uuid.uuid4().hex[:8]}"
    app = make_app(declared)
    store = new_store()
    tokens = make_tokens(admin=["*"])
    headers = bearer(tokens["admin"])
    api = build_api(
        app,
        client,
        store,
        tokens=list(tokens.values()),
        task_queue=task_queue,
        knowledge_model="test/schema",
        # a folder, as `chamvi api` keeps them: its path rules are the ones a generated id meets
        artifacts=ArtifactStore.local(tmp_path / "artifacts"),
    )
    async with knowledge_worker(client, app, store, task_queue), serving(api) as url:
        async with httpx.AsyncClient(base_url=url, headers=headers) as http:
            spec = (await http.get("/openapi.json")).json()
            # the document's examples (collection 'tickets', document 'T-1042') name things that exist
            assert (await http.post("/knowledge/collections", json={"name": "tickets"})).status_code == 201
            put = await http.put(
                "/knowledge/collections/tickets/documents/T-1042", json={"content": "Exports."}
            )
            assert put.status_code == 202
        failures, answers = await asyncio.to_thread(run_schemathesis, spec, url, headers)
    assert not failures, "\n\n".join(failures)
    # the examples reached the routes' work, not only their validation, and invalid requests were sent
    assert {"200", "201", "202", "204", "404", "405", "422"} <= statuses(answers), answers
