"""Schemathesis against ``/openapi.json``: no input makes a route answer 5xx or break its own schema.

The whole API runs for real (uvicorn on loopback, a worker, the session's Temporal, knowledge and runs
routes) with a token holding every permission; schemathesis generates requests from the served
document, bounded in examples per operation and in time: valid requests must get no 5xx and only
documented answers, invalid ones (wrong types, missing fields, broken auth) no 5xx either.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error, response_schema_conformance
from schemathesis.core.failures import FailureGroup
from temporalio.client import Client

from chamvi import App, define_agent, webhook_channel
from chamvi.http import build_api
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from tests.knowledge_helpers import CountingEmbedder, knowledge_worker, new_store
from tests.support.http_api import bearer, make_tokens, serving

MAX_EXAMPLES = 20
MAX_NEGATIVE_EXAMPLES = 10
BUDGET_SECONDS = 90.0


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
    spec: dict[str, Any],
    base_url: str,
    headers: dict[str, str],
    *,
    mode: GenerationMode,
    max_examples: int,
    checks: list[Any],
    deadline: float,
) -> tuple[list[str], Counter[str]]:
    """Runs every operation's examples; returns the failures and the answers by operation and status."""
    schema = schemathesis.openapi.from_dict(spec)
    failures: list[str] = []
    answers: Counter[str] = Counter()
    with requests.Session() as session:
        operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
        # deletes last, documents before collections, so the examples find what they name
        operations.sort(key=lambda op: (op.method.upper() == "DELETE", -len(op.path)))
        for operation in operations:
            if time.monotonic() > deadline:
                failures.append(f"{operation.label} ({mode.value}): not run, the time budget is spent")
                continue

            @settings(
                max_examples=max_examples,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                response = case.call_and_validate(
                    base_url=base_url, session=session, headers=headers, checks=checks, timeout=30
                )
                answers[f"{case.operation.label} {response.status_code}"] += 1

            try:
                check()
            except (Exception, FailureGroup) as error:  # keep going: report every operation
                failures.append(f"{operation.label} ({mode.value}): {_described(error)}")
    return failures, answers


def statuses(answers: Counter[str]) -> set[str]:
    return {key.rsplit(" ", 1)[1] for key in answers}


async def test_no_generated_request_gets_a_5xx_or_an_answer_outside_the_schema(
    client: Client, task_queue: str
) -> None:
    declared = f"handbook-{uuid.uuid4().hex[:8]}"
    app = make_app(declared)
    store = new_store()
    tokens = make_tokens(admin=["*"])
    headers = bearer(tokens["admin"])
    api = build_api(
        app, client, store, tokens=list(tokens.values()), task_queue=task_queue, knowledge_model="test/schema"
    )
    deadline = time.monotonic() + BUDGET_SECONDS
    async with knowledge_worker(client, app, store, task_queue), serving(api) as url:
        async with httpx.AsyncClient(base_url=url, headers=headers) as http:
            spec = (await http.get("/openapi.json")).json()
            # the document's examples (collection 'tickets', document 'T-1042') name things that exist
            assert (await http.post("/knowledge/collections", json={"name": "tickets"})).status_code == 201
            put = await http.put(
                "/knowledge/collections/tickets/documents/T-1042", json={"content": "Exports."}
            )
            assert put.status_code == 202
        # valid requests: no 5xx, and every answer as documented
        failures, answers = await asyncio.to_thread(
            run_schemathesis,
            spec,
            url,
            headers,
            mode=GenerationMode.POSITIVE,
            max_examples=MAX_EXAMPLES,
            checks=[not_a_server_error, response_schema_conformance],
            deadline=deadline,
        )
        # invalid ones (wrong types, missing fields, broken auth): still no 5xx
        negative_failures, negative = await asyncio.to_thread(
            run_schemathesis,
            spec,
            url,
            headers,
            mode=GenerationMode.NEGATIVE,
            max_examples=MAX_NEGATIVE_EXAMPLES,
            checks=[not_a_server_error],
            deadline=deadline,
        )
    assert not failures + negative_failures, "\n\n".join(failures + negative_failures)
    # the examples reached the routes' work, not only their validation
    assert {"200", "202", "204", "404", "422"} <= statuses(answers), answers
    assert {"401", "422"} <= statuses(negative), negative
