"""Streamed model calls over real HTTP: a loopback OpenAI-compatible server that streams, a real worker,
and the deltas through ``App.on`` and the API's event stream in the same process (``chamvi dev``)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel
from temporalio.client import Client
from temporalio.common import RetryPolicy

from chamvi import (
    App,
    ChamviClient,
    RetryPolicies,
    RunEvent,
    RunStatus,
    ToolContext,
    define_agent,
    extract,
    tool,
)
from chamvi.http import Token, create_api
from chamvi.plugin import ChamviPlugin
from chamvi.providers import ModelRegistry, OpenAIProvider
from chamvi.runtime import local_plugin
from tests.polling import eventually
from tests.support.http_api import bearer, make_tokens, serving
from tests.support.openai_server import Hold, OpenAIServer, Reasoning, StreamError, stream, text, tool_call

CALLED: list[tuple[int, int]] = []


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    CALLED.append((a, b))
    return a + b


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


def app_for(server: OpenAIServer, *, streaming: bool = True) -> App:
    provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
    provider.stream = streaming
    once_more = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=50))
    return App(
        agents=[define_agent(name="adder", model="openai/test-model", instructions="Add.", tools=[add])],
        models=ModelRegistry(providers={"openai": provider.model}),
        # a retried call should come back at once in a test
        retry=RetryPolicies(model=once_more),
    )


def listened_api(
    server: OpenAIServer, chamvi: ChamviClient
) -> tuple[ChamviPlugin, list[RunEvent], dict[str, Token], FastAPI]:
    """The app's worker plugin (its deltas heard in order) and an API in the same process, as in
    ``chamvi dev``."""
    app = app_for(server)
    heard: list[RunEvent] = []
    app.on("run.delta", heard.append)
    tokens = make_tokens(reader=["runs:read"])
    plugin = local_plugin(app)
    return (
        plugin,
        heard,
        tokens,
        create_api(tokens=list(tokens.values()), managed=None, runs=chamvi, events=plugin.runtime.events),
    )


async def test_deltas_reach_listeners_and_the_event_stream_in_order_while_the_model_writes(
    client: Client, chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    paused = threading.Event()
    server.add(stream(Reasoning("2 and 3"), "Hel", paused, "lo", " world", usage=(20, 5)))
    app, heard, tokens, api = listened_api(server, chamvi)
    async with running_worker(app), serving(api) as url:
        run_id = (await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id
        http = httpx.AsyncClient(base_url=url, headers=bearer(tokens["reader"]), timeout=60)
        async with http, http.stream("GET", f"/runs/{run_id}/events") as response:

            async def read() -> list[tuple[str, dict[str, object]]]:
                events: list[tuple[str, dict[str, object]]] = []
                kind = ""
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        events.append((kind, json.loads(line.removeprefix("data: "))))
                return events

            reading = asyncio.create_task(read())

            async def first_text() -> bool | None:
                return True if any(e.data["text"] == "Hel" for e in heard) else None

            # the server holds the rest of its answer until the first words have arrived
            await eventually(first_text, "the first delta arriving while the model still writes")
            assert [e.data["text"] for e in heard] == ["2 and 3", "Hel"]

            async def heartbeat() -> bool | None:
                description = await client.get_workflow_handle(run_id).describe()
                pending = description.raw_description.pending_activities
                return True if pending and pending[0].HasField("last_heartbeat_time") else None

            # the model call heartbeats while it streams, so a cancelled run's call hears of it
            await eventually(heartbeat, "the streaming model call heartbeating")
            paused.set()
            received = await reading
        run = await chamvi.wait(run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "Hello world"
    assert (run.usage.input_tokens, run.usage.output_tokens) == (20, 5)
    assert [(e.data["step"], e.data["kind"], e.data["text"]) for e in heard] == [
        (0, "reasoning", "2 and 3"),
        (0, "text", "Hel"),
        (0, "text", "lo"),
        (0, "text", " world"),
    ]
    assert all(e.event_id is None and e.run_id == run_id for e in heard)
    kinds = [kind for kind, _ in received]
    assert kinds == ["run.started", *["run.delta"] * 4, "run.step", "run.completed"]
    written = "".join(str(data["text"]) for kind, data in received if kind == "run.delta")
    assert written == "2 and 3Hello world"
    step = received[-2][1]
    assert (step["text"], step["usage"]) == ("Hello world", {"input_tokens": 20, "output_tokens": 5})
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["stream_options"] == {"include_usage": True}


async def test_an_event_stream_opened_after_the_model_began_writing_gets_its_first_words(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    paused = threading.Event()
    server.add(stream("Hel", paused, "lo"))
    app, heard, tokens, api = listened_api(server, chamvi)
    async with running_worker(app), serving(api) as url:
        run_id = (await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id

        async def first_words() -> bool | None:
            return True if heard else None

        # "Hel" is written and the model holds the rest before anyone opens the stream
        await eventually(first_words, "the model's first words")
        http = httpx.AsyncClient(base_url=url, headers=bearer(tokens["reader"]), timeout=60)
        async with http, http.stream("GET", f"/runs/{run_id}/events") as response:
            deltas: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data: ") and (data := json.loads(line[6:]))["type"] == "run.delta":
                    deltas.append(data["text"])
                    paused.set()
                elif line.startswith("data: ") and data["type"] == "run.completed":
                    break
        run = await chamvi.wait(run_id)

    assert run.output == "Hello"
    assert deltas == ["Hel", "lo"]


async def test_a_stream_that_breaks_mid_answer_keeps_the_text_so_far_and_fails_the_run_with_the_models_error(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(stream("Hal", "f", StreamError("the model server is overloaded")))
    async with running_worker(app_for(server)):
        run_id = (await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id
        run = await chamvi.wait(run_id)
        events = [event async for event in chamvi.events(run_id)]

    assert run.status == RunStatus.FAILED
    assert run.error is not None
    assert run.error.code == "provider_unavailable"
    assert "the model server is overloaded" in run.error.message
    assert [(s.kind, s.text) for s in run.steps] == [("llm", "Half")]
    assert len(server.requests) == 1  # not tried again: the model had begun to answer
    step = next(e for e in events if e.type == "run.step")
    assert (step.data["text"], step.data["finish_reason"]) == ("Half", "error")
    assert events[-1].type == "run.failed"
    assert events[-1].data["error"] == {"code": "provider_unavailable", "message": run.error.message}


async def test_a_stream_that_fails_before_any_output_is_retried_as_a_failed_call_is(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(stream(StreamError("warming up")), text("5"))
    async with running_worker(app_for(server)):
        run = await chamvi.wait((await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    assert len(server.requests) == 2


async def test_a_stream_closed_without_a_finish_fails_the_run_as_incomplete_and_runs_none_of_its_tool_calls(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    CALLED.clear()
    fragment = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": ""}}
    server.add(
        stream(
            {"tool_calls": [fragment]},
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1, "b": 2}'}}]},
            finish_reason=None,
        )
    )
    async with running_worker(app_for(server)):
        run = await chamvi.wait((await chamvi.dispatch("adder", {"a": 1, "b": 2})).run_id)

    assert run.status == RunStatus.FAILED
    assert run.error is not None
    assert run.error.code == "incomplete_response"
    assert "1 tool call(s) did not run" in run.error.message
    assert CALLED == []
    assert [s.kind for s in run.steps] == ["llm"]
    assert run.steps[0].tool_calls[0].arguments == {"a": 1, "b": 2}


async def test_a_provider_told_not_to_stream_asks_for_one_whole_answer(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(text("5", usage=(7, 1)))
    async with running_worker(app_for(server, streaming=False)):
        run = await chamvi.wait((await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    assert (run.output, run.usage.input_tokens, run.usage.output_tokens) == ("5", 7, 1)
    assert "stream" not in server.requests[0].body


class Urgency(BaseModel):
    urgent: bool


@tool
async def triage(ctx: ToolContext) -> str:
    """Reads a message through an extraction."""
    return str((await extract(ctx, schema=Urgency, content="Server down!")).urgent)


async def test_an_extraction_whose_stream_breaks_is_made_again(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(
        tool_call("triage", {}),
        stream('{"urg', StreamError("the model server is overloaded")),
        text('{"urgent": true}'),
        text("urgent"),
    )
    provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
    once_more = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=50))
    app = App(
        agents=[
            define_agent(name="triager", model="openai/test-model", instructions="Triage.", tools=[triage])
        ],
        models=ModelRegistry(providers={"openai": provider.model}),
        retry=RetryPolicies(model=once_more),
    )
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("triager")).run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.steps[1].output == "True"
    assert len(server.requests) == 4


async def test_cancelling_a_run_stops_its_model_call_even_while_the_stream_stalls(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    stalled = Hold()
    server.add(stream("Hel", stalled))
    app = app_for(server)
    heard: list[RunEvent] = []
    app.on("run.delta", heard.append)
    async with running_worker(app):
        run_id = (await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id

        async def writing() -> bool | None:
            return True if heard else None

        await eventually(writing, "the model beginning to write")
        await chamvi.cancel(run_id)

        async def let_go() -> bool | None:
            return True if stalled.closed.is_set() else None

        # the timer's heartbeat brings the cancellation, which closes the stream
        await eventually(let_go, "the cancelled model call closing its stream")
        run = await chamvi.wait(run_id)

    assert run.status == RunStatus.CANCELLED
