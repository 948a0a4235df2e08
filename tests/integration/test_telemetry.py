"""OpenTelemetry: the span tree of a run with an approval, from the HTTP request down to each tool call,
with the GenAI attributes and no payload content; and the worker's metrics on its Prometheus endpoint.

Spans go to an in-memory exporter on the process's tracer provider; the worker and the HTTP API run
against the session's real Temporal dev server, the client traced by temporalio's interceptor, the
way the README tells a user to set it up.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from chamvi import App, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi._constants import AGENT_RUN_WORKFLOW
from chamvi._lifecycle import memory_index
from chamvi.http import create_api
from chamvi.knowledge import folder, knowledge_collection
from chamvi.plugin import ChamviPlugin
from chamvi.providers import AnthropicProvider, ModelRegistry, OpenAIProvider, ScriptedModel, call, reply
from chamvi.providers.compatible import openai_compatible
from chamvi.runtime import build_worker, connect
from chamvi.settings import Settings
from tests.knowledge_helpers import CountingEmbedder, knowledge_worker, new_store, reader_app, wait_for_meta
from tests.polling import eventually, until_status
from tests.support.anthropic_server import AnthropicServer
from tests.support.anthropic_server import text as anthropic_text
from tests.support.anthropic_server import tool_use as anthropic_tool_use
from tests.support.http_api import bearer, make_tokens, serving
from tests.support.openai_server import OpenAIServer, error, text, tool_call
from tests.support.otlp_collector import Collector

SECRETS = ("PAYLOAD-SECRET", "ARGUMENT-SECRET", "RESULT-SECRET", "REPLY-SECRET", "INSTRUCTIONS-SECRET")


@tool
async def ship(version: str, ctx: ToolContext) -> str:
    """Ships a version once a person approves."""
    decision = await approve(ctx, title="Ship it?")
    return f"shipped {version} RESULT-SECRET" if decision.approved else "not shipped"


def make_app(agent: str) -> App:
    models = ModelRegistry()
    models.register(
        "scripted/shipper",
        ScriptedModel([call("ship", "call-1", version="ARGUMENT-SECRET"), reply("REPLY-SECRET")]),
    )
    return App(
        agents=[
            define_agent(
                name=agent, model="scripted/shipper", instructions="INSTRUCTIONS-SECRET", tools=[ship]
            )
        ],
        models=models,
    )


@pytest.fixture(scope="session")
def exporter() -> InMemorySpanExporter:
    """Every span this process ends, on the global provider (installed once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
async def traced_client(temporal_env: WorkflowEnvironment) -> Client:
    config = temporal_env.client.config()
    return await Client.connect(
        config["service_client"].config.target_host,
        namespace=temporal_env.client.namespace,
        data_converter=pydantic_data_converter,
        interceptors=[TracingInterceptor(always_create_workflow_spans=True)],
    )


@dataclass
class Trace:
    spans: list[ReadableSpan]

    def named(self, name: str) -> list[ReadableSpan]:
        return sorted((s for s in self.spans if s.name == name), key=lambda s: s.start_time or 0)

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {sorted({s.name for s in self.spans})}"
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None, f"{span.name} has no parent"
        return next(
            s for s in self.spans if s.context is not None and s.context.span_id == span.parent.span_id
        )

    def ancestors(self, span: ReadableSpan) -> Iterator[str]:
        while span.parent is not None:
            span = self.parent(span)
            yield span.name

    def values(self) -> Iterator[str]:
        for span in self.spans:
            yield span.name
            for attributes in [span.attributes, *(e.attributes for e in span.events)]:
                for value in (attributes or {}).values():
                    yield str(value)


def trace_of(exporter: InMemorySpanExporter, root: trace.Span) -> Trace:
    trace_id = root.get_span_context().trace_id
    return Trace([s for s in exporter.get_finished_spans() if s.context and s.context.trace_id == trace_id])


def spans_of_run(exporter: InMemorySpanExporter, run_id: str) -> Trace:
    """Every span of run ``run_id``'s trace; fails unless the run's own spans share one trace id.

    The run's own spans: chamvi's (``chamvi.run.id``) and temporalio's (``temporalWorkflowID``), but
    for queries: a query reads the run, in the trace of whoever asks (or in none).
    """
    finished = [s for s in exporter.get_finished_spans() if s.context is not None]
    ours = [
        s
        for s in finished
        if run_id in [(s.attributes or {}).get(key) for key in ("chamvi.run.id", "temporalWorkflowID")]
        and "Query" not in s.name
    ]
    traces = {s.context.trace_id for s in ours if s.context is not None}
    assert len(traces) == 1, f"{len(traces)} traces: {sorted((s.name, s.context.trace_id) for s in ours)}"
    return Trace([s for s in finished if s.context is not None and s.context.trace_id in traces])


def assert_rooted_in_invoke_agent(spans: Trace, agent: str) -> ReadableSpan:
    """``invoke_agent`` is the root of the trace and every other span descends from it."""
    invoked = spans.one(f"invoke_agent {agent}")
    assert invoked.parent is None
    strays = [s.name for s in spans.spans if s is not invoked and invoked.name not in spans.ancestors(s)]
    assert strays == []
    return invoked


@asynccontextmanager
async def traced_stack(
    client: Client, app: App, plugin: ChamviPlugin | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A worker on ``client`` and the HTTP API in front of it; yields an HTTP client with every permission."""
    task_queue = f"telemetry-{uuid.uuid4().hex[:8]}"
    tokens = make_tokens(admin=["*"])
    api = create_api(
        tokens=list(tokens.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue),
        agents=list(app.agents),
    )
    async with (
        build_worker(client, plugin or app, task_queue=task_queue),
        serving(api) as url,
        httpx.AsyncClient(base_url=url, headers=bearer(tokens["admin"]), timeout=30) as http,
    ):
        yield http


async def run_with_approval(http: httpx.AsyncClient, agent: str, root: trace.Span) -> None:
    """Dispatches over HTTP, approves the approval, waits for the end; all in ``root``'s trace."""
    headers: dict[str, str] = {}
    propagate.inject(headers, context=trace.set_span_in_context(root))
    dispatched = await http.post(
        "/runs", json={"agent": agent, "payload": {"note": "PAYLOAD-SECRET"}}, headers=headers
    )
    assert dispatched.status_code == 202, dispatched.text
    run_id = dispatched.json()["run_id"]

    async def run_in(status: str) -> dict[str, Any] | None:
        run = (await http.get(f"/runs/{run_id}", headers=headers)).json()
        return dict(run) if run["status"] == status else None

    waiting = await eventually(lambda: run_in("waiting"), "the run waiting on its approval")
    answer = {"approval_id": waiting["waiting"]["approval_id"], "approved": True}
    approved = await http.post(f"/runs/{run_id}/approve", json=answer, headers=headers)
    assert approved.status_code == 200, approved.text
    await eventually(lambda: run_in("completed"), "the run completing")


async def test_a_run_with_an_approval_is_one_trace_from_the_http_request_to_each_tool_call(
    traced_client: Client, exporter: InMemorySpanExporter
) -> None:
    agent = f"shipper-{uuid.uuid4().hex[:6]}"
    async with traced_stack(traced_client, make_app(agent)) as http:
        with trace.get_tracer("tests").start_as_current_span("caller") as root:
            await run_with_approval(http, agent, root)
    spans = trace_of(exporter, root)

    # the HTTP request, the client's start, the run, and each activity, in one tree
    dispatch = spans.one("POST /runs")
    assert spans.parent(dispatch).name == "caller"
    assert dispatch.attributes is not None and dispatch.attributes["http.response.status_code"] == 202
    start = spans.one("StartWorkflow:AgentRun")
    assert list(spans.ancestors(start))[-2:] == ["POST /runs", "caller"]
    # the run's invoke_agent span under the start, and the whole run under it: temporalio's
    # workflow spans (RunWorkflow, StartActivity) and the activities' in them
    invoked = spans.one(f"invoke_agent {agent}")
    assert spans.parent(invoked) is start
    run = spans.one("RunWorkflow:AgentRun")
    assert spans.parent(run) is invoked
    assert "POST /runs/{run_id}/approve" in [s.name for s in spans.spans]

    chats = spans.named("chat shipper")
    assert len(chats) == 2
    for chat in chats:
        assert list(spans.ancestors(chat))[:4] == [
            "RunActivity:chamvi.call_model",
            "StartActivity:chamvi.call_model",
            f"invoke_agent {agent}",
            "StartWorkflow:AgentRun",
        ]
    first, last = (dict(c.attributes or {}) for c in chats)
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "scripted"
    assert first["gen_ai.request.model"] == "shipper"
    assert first["gen_ai.agent.name"] == agent
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (10, 5)
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert last["gen_ai.response.finish_reasons"] == ("stop",)
    assert first["chamvi.run.id"] == last["chamvi.run.id"]
    assert "gen_ai.conversation.id" not in first  # the run is no turn of a conversation

    # the tool ran twice: once to ask for the approval, once after it, both under the run
    tools = spans.named("execute_tool ship")
    assert [(t.attributes or {}).get("chamvi.tool.status") for t in tools] == ["approval", "ok"]
    for tool_span in tools:
        attributes = tool_span.attributes or {}
        assert attributes["gen_ai.tool.name"] == "ship" and attributes["gen_ai.tool.call.id"] == "call-1"
        assert spans.parent(tool_span).name == "RunActivity:chamvi.call_tool"
        assert f"invoke_agent {agent}" in spans.ancestors(tool_span)
    assert [(t.attributes or {})["chamvi.approval.decisions"] for t in tools] == [0, 1]

    # the run as a whole: invoke_agent from its start to its end (the approval's wait included)
    assert invoked.start_time is not None and invoked.end_time is not None and chats[-1].end_time is not None
    assert invoked.start_time <= chats[0].start_time <= chats[-1].end_time <= invoked.end_time  # type: ignore[operator]
    agent_attributes = dict(invoked.attributes or {})
    assert agent_attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent_attributes["gen_ai.agent.name"] == agent
    assert agent_attributes["chamvi.run.id"] == first["chamvi.run.id"]
    assert "gen_ai.conversation.id" not in agent_attributes
    assert agent_attributes["gen_ai.usage.input_tokens"] == 20
    assert agent_attributes["chamvi.run.status"] == "completed"

    leaked = [(secret, value) for value in spans.values() for secret in SECRETS if secret in value]
    assert leaked == []


async def test_spans_carry_messages_arguments_and_results_only_when_asked(
    traced_client: Client, exporter: InMemorySpanExporter
) -> None:
    agent = f"shipper-{uuid.uuid4().hex[:6]}"
    app = make_app(agent)
    plugin = ChamviPlugin(app, index=memory_index(), start_collections=False, trace_content=True)
    async with traced_stack(traced_client, app, plugin) as http:
        with trace.get_tracer("tests").start_as_current_span("caller") as root:
            await run_with_approval(http, agent, root)
    spans = trace_of(exporter, root)
    first, last = (dict(c.attributes or {}) for c in spans.named("chat shipper"))
    assert "PAYLOAD-SECRET" in str(first["gen_ai.input.messages"])
    assert "ARGUMENT-SECRET" in str(first["gen_ai.output.messages"])
    assert "RESULT-SECRET" in str(last["gen_ai.input.messages"])
    assert "REPLY-SECRET" in str(last["gen_ai.output.messages"])
    # the conventions' JSON form: messages of typed parts, the answer with its finish reason
    sent = json.loads(str(first["gen_ai.input.messages"]))
    assert sent[0]["role"] == "user" and sent[0]["parts"][0]["type"] == "text"
    (answer,) = json.loads(str(first["gen_ai.output.messages"]))
    assert (answer["role"], answer["finish_reason"]) == ("assistant", "tool_calls")
    (asked_call,) = [p for p in answer["parts"] if p["type"] == "tool_call"]
    assert (asked_call["id"], asked_call["name"]) == ("call-1", "ship")
    later = json.loads(str(last["gen_ai.input.messages"]))
    (response,) = [p for m in later for p in m["parts"] if p["type"] == "tool_call_response"]
    assert response["id"] == "call-1" and "RESULT-SECRET" in response["response"]
    asked, done = (dict(t.attributes or {}) for t in spans.named("execute_tool ship"))
    assert "ARGUMENT-SECRET" in str(asked["gen_ai.tool.call.arguments"])
    assert "gen_ai.tool.call.result" not in asked  # an approval request is no result
    assert "RESULT-SECRET" in str(done["gen_ai.tool.call.result"])


def metrics_settings(temporal_env: WorkflowEnvironment) -> Settings:
    """Settings for a client whose runtime serves metrics on a free local port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return Settings(
        temporal_address=temporal_env.client.config()["service_client"].config.target_host,
        temporal_namespace=temporal_env.client.namespace,
        metrics_address=f"127.0.0.1:{port}",
    )


async def metrics_page(settings: Settings) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://{settings.metrics_address}/metrics")).text


def samples(text: str, name: str, **labels: str) -> Sequence[float]:
    """The values of metric ``name`` whose labels include ``labels``, from a Prometheus text page."""
    values = []
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{key}="{label}"' in head for key, label in labels.items()):
            values.append(float(value))
    return values


async def test_the_worker_serves_temporal_and_chamvi_metrics_on_its_prometheus_endpoint(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    settings = metrics_settings(temporal_env)
    client = await connect(settings, serving=True)
    agent = f"shipper-{uuid.uuid4().hex[:6]}"
    chamvi = ChamviClient(client, task_queue=task_queue)
    async with build_worker(client, make_app(agent), task_queue=task_queue):
        run_id = (await chamvi.dispatch(agent)).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        page = await metrics_page(settings)
        assert samples(page, "chamvi_runs_entered", agent=agent, status="waiting") == [1]
        assert samples(page, "chamvi_runs_left", agent=agent, status="waiting") == []
        await chamvi.approvals.approve(run_id, approved=True)
        await chamvi.wait(run_id)

        async def settled() -> str | None:
            text = await metrics_page(settings)
            return text if samples(text, "chamvi_runs_entered", agent=agent, status="completed") else None

        page = await eventually(settled, "the completed run on the metrics page")
    # approvals waiting = entered - left of `waiting`: none now
    assert samples(page, "chamvi_runs_left", agent=agent, status="waiting") == [1]
    assert samples(page, "chamvi_runs_entered", agent=agent, status="queued") == [1]
    assert samples(page, "chamvi_runs_entered", agent=agent, status="running") == [2]
    assert samples(page, "chamvi_steps", agent=agent, kind="llm") == [2]
    assert samples(page, "chamvi_steps", agent=agent, kind="tool") == [1]
    assert samples(page, "chamvi_tokens", agent=agent, direction="input") == [20]
    assert samples(page, "chamvi_tokens", agent=agent, direction="output") == [10]
    # the GenAI conventions' histograms, named as Prometheus spells them
    assert samples(page, "gen_ai_client_token_usage_sum", gen_ai_token_type="input") == [20]
    assert samples(page, "gen_ai_client_operation_duration_count", gen_ai_operation_name="chat") == [2]
    # Temporal's own worker metrics, on the same page
    assert samples(
        page,
        "temporal_activity_execution_latency_count",
        activity_type="chamvi.call_tool",
        task_queue=task_queue,
    )
    assert samples(page, "temporal_workflow_completed", workflow_type="AgentRun", task_queue=task_queue) == [
        1
    ]


async def test_a_knowledge_pass_and_a_search_have_their_spans_and_the_pass_its_duration(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    settings = metrics_settings(temporal_env)
    client = await connect(settings, serving=True)
    name = f"kb-{uuid.uuid4().hex[:8]}"
    (tmp_path / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days.\n")
    embedder = CountingEmbedder()
    turns = [call("knowledge_search", query="QUERY-SECRET refunds"), reply("14 days")]
    collection = knowledge_collection(name, model=embedder.ref, sources=[folder(tmp_path)])
    app = reader_app(collection, embedder, turns=turns)
    chamvi = ChamviClient(client, task_queue=task_queue)
    store = new_store()
    async with knowledge_worker(client, app, store, task_queue):
        await wait_for_meta(store, name, "ready")  # a search before the first pass ends is refused
        run = await chamvi.wait((await chamvi.dispatch("reader")).run_id)
        page = await metrics_page(settings)
    assert run.status == RunStatus.COMPLETED
    passes = [s for s in exporter.get_finished_spans() if s.name == f"knowledge pass {name}"]
    assert len(passes) == 1
    attributes = dict(passes[0].attributes or {})
    assert attributes["chamvi.knowledge.status"] == "ready"
    assert (attributes["chamvi.knowledge.documents"], attributes["chamvi.knowledge.passages"]) == (1, 1)
    assert samples(page, "chamvi_knowledge_pass_duration_count", collection=name, outcome="ready") == [1]

    spans = spans_of_run(exporter, run.run_id)
    search = spans.one("knowledge search")
    assert spans.parent(search).name == "execute_tool knowledge_search"
    assert dict(search.attributes or {})["chamvi.knowledge.collections"] == (name,)
    assert dict(search.attributes or {})["chamvi.knowledge.matches"] == 1
    assert not [value for value in spans.values() if "QUERY-SECRET" in value]


EXPORTING = """
import asyncio
from opentelemetry import trace
from chamvi.runtime import connect
from chamvi.settings import Settings
from chamvi.telemetry._otel import exporting_traces

settings = Settings.from_env()
with exporting_traces(settings, "chamvi-probe"):
    print(type(trace.get_tracer_provider()).__name__, flush=True)
    with trace.get_tracer("probe").start_as_current_span("probe span"):
        pass

async def main() -> None:
    client = await connect(settings, serving=True)
    await client.count_workflows()
    await asyncio.sleep(120)  # the metrics leave on the runtime's own schedule; the test stops us

asyncio.run(main())
"""


def probe(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", EXPORTING],
        env={**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, **env},
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("service_env", "service"),
    [({}, b"chamvi-probe"), ({"OTEL_SERVICE_NAME": "billing-worker"}, b"billing-worker")],
    ids=["chamvi-names-the-service", "otel-service-name-wins"],
)
async def test_traces_and_metrics_leave_by_otlp_when_the_endpoint_is_set(
    temporal_env: WorkflowEnvironment, service_env: dict[str, str], service: bytes
) -> None:
    collector = Collector()
    target = temporal_env.client.config()["service_client"].config.target_host
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url + "/",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cr%3Dt",
        "TEMPORAL_ADDRESS": target,
        **service_env,
    }
    process = probe(env)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "TracerProvider"

        async def exported() -> bool | None:
            return True if collector.bodies("/v1/traces") and collector.bodies("/v1/metrics") else None

        await eventually(exported, "spans and metrics reaching the collector")
    finally:
        process.terminate()
        process.wait()
        collector.close()
    spans = b"".join(collector.bodies("/v1/traces"))
    assert b"probe span" in spans and service in spans
    assert b"temporal_request" in b"".join(collector.bodies("/v1/metrics"))
    for path in ("/v1/traces", "/v1/metrics"):  # a hosted backend's key goes with both
        assert {h.get("x-api-key") for h in collector.headers(path)} == {"s3cr=t"}, path


def test_nothing_is_exported_without_an_endpoint(temporal_env: WorkflowEnvironment) -> None:
    target = temporal_env.client.config()["service_client"].config.target_host
    env = {"TEMPORAL_ADDRESS": target, "OTEL_EXPORTER_OTLP_ENDPOINT": ""}
    process = probe(env)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ProxyTracerProvider"
    finally:
        process.terminate()
        process.wait()


async def test_a_one_shot_client_beside_a_serving_one_leaves_the_metrics_port_to_it(
    temporal_env: WorkflowEnvironment,
) -> None:
    settings = metrics_settings(temporal_env)
    await connect(settings, serving=True)  # binds the metrics port, as a worker does
    one_shot = await connect(settings)  # `chamvi dispatch` in the same shell: binding again would fail
    await one_shot.count_workflows()
    assert "temporal_" in await metrics_page(settings)


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


async def test_a_failed_model_call_is_an_error_span_by_code_and_its_retry_a_span_of_its_own(
    chamvi: ChamviClient, running_worker: Any, exporter: InMemorySpanExporter
) -> None:
    with OpenAIServer() as server:
        server.add(error(500, "MESSAGE-SECRET overloaded"), tool_call("add", {"a": 2, "b": 3}), text("5"))
        models = ModelRegistry(
            providers={"openai": OpenAIProvider(api_key="test", base_url=server.url + "/v1").model}
        )
        agent = define_agent(name="adder", model="openai/test-model", instructions="Add.", tools=[add])
        async with running_worker(App(agents=[agent], models=models)):
            run = await chamvi.wait((await chamvi.dispatch("adder")).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    spans = spans_of_run(exporter, run.run_id)
    failed, first, last = (dict(s.attributes or {}) for s in spans.named("chat test-model"))
    statuses = [s.status.status_code for s in spans.named("chat test-model")]
    assert statuses == [StatusCode.ERROR, StatusCode.UNSET, StatusCode.UNSET]
    assert failed["error.type"] == "provider_unavailable"
    assert "gen_ai.usage.input_tokens" not in failed
    assert (first["gen_ai.provider.name"], first["gen_ai.request.model"]) == ("openai", "test-model")
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (10, 7)
    assert (last["gen_ai.usage.input_tokens"], last["gen_ai.usage.output_tokens"]) == (12, 3)
    assert dict(spans.one("execute_tool add").attributes or {})["chamvi.tool.status"] == "ok"
    assert not [value for value in spans.values() if "MESSAGE-SECRET" in value]


def adder_app(agent: str, additions: int) -> App:
    turns = [call("add", f"call-{n}", a=n, b=1) for n in range(additions)]
    models = ModelRegistry()
    models.register("scripted/adder", ScriptedModel([*turns, reply("done")]))
    adder = define_agent(name=agent, model="scripted/adder", instructions="Add.", tools=[add])
    return App(agents=[adder], models=models)


@pytest.mark.parametrize("worker_traced", [True, False], ids=["traced-worker", "untraced-worker"])
@pytest.mark.parametrize("started_by", ["chamvi-client", "temporal-cli"])
async def test_a_run_started_without_a_span_is_one_trace_with_invoke_agent_at_its_root(
    client: Client,
    traced_client: Client,
    task_queue: str,
    exporter: InMemorySpanExporter,
    worker_traced: bool,
    started_by: str,
) -> None:
    agent = f"adder-{uuid.uuid4().hex[:6]}"
    chamvi = ChamviClient(client, task_queue=task_queue)  # no tracing interceptor, as `chamvi dispatch`
    worker_client = traced_client if worker_traced else client
    async with build_worker(worker_client, adder_app(agent, 3), task_queue=task_queue):
        if started_by == "chamvi-client":
            run_id = (await chamvi.dispatch(agent)).run_id
        else:  # the JSON `temporal workflow start --type AgentRun --input '...'` sends, no header
            run_id = f"cli-{uuid.uuid4().hex[:8]}"
            await client.start_workflow(
                AGENT_RUN_WORKFLOW, {"agent": agent}, id=run_id, task_queue=task_queue
            )
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED, run.error

    spans = spans_of_run(exporter, run_id)
    assert_rooted_in_invoke_agent(spans, agent)
    assert len(spans.named("chat adder")) == 4
    assert len(spans.named("execute_tool add")) == 3
    if worker_traced:  # temporalio's spans in the same tree: the workflow's and each activity's
        assert len(spans.named("RunActivity:chamvi.call_model")) == 4
        for chat in spans.named("chat adder"):
            assert spans.parent(chat).name == "RunActivity:chamvi.call_model"
    else:
        for chat in spans.named("chat adder"):
            assert spans.parent(chat).name == f"invoke_agent {agent}"


async def test_a_run_that_outlives_its_worker_is_still_one_trace(
    client: Client, traced_client: Client, task_queue: str, exporter: InMemorySpanExporter
) -> None:
    agent = f"shipper-{uuid.uuid4().hex[:6]}"
    app = make_app(agent)
    chamvi = ChamviClient(client, task_queue=task_queue)
    run_id = f"cli-{uuid.uuid4().hex[:8]}"
    async with build_worker(traced_client, app, task_queue=task_queue):
        await client.start_workflow(AGENT_RUN_WORKFLOW, {"agent": agent}, id=run_id, task_queue=task_queue)
        await until_status(chamvi, run_id, RunStatus.WAITING)
    # a new worker replays the run from its history, then runs the rest
    async with build_worker(traced_client, make_app(agent), task_queue=task_queue):
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED, run.error

    spans = spans_of_run(exporter, run_id)
    assert_rooted_in_invoke_agent(spans, agent)
    assert len(spans.named("chat shipper")) == 2
    assert [(t.attributes or {}).get("chamvi.tool.status") for t in spans.named("execute_tool ship")] == [
        "approval",
        "ok",
    ]


@pytest.fixture
def anthropic_sdk_instrumented() -> Iterator[InMemoryMetricReader]:
    """OpenLLMetry's instrumentation of the ``anthropic`` SDK, as a user installs it; yields its metrics."""
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    reader = InMemoryMetricReader()
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(
        tracer_provider=trace.get_tracer_provider(), meter_provider=MeterProvider(metric_readers=[reader])
    )
    try:
        yield reader
    finally:
        instrumentor.uninstrument()


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_an_anthropic_call_is_one_chat_span_with_its_response_id_and_model_beside_sdk_instrumentation(
    chamvi: ChamviClient,
    running_worker: Any,
    exporter: InMemorySpanExporter,
    anthropic_sdk_instrumented: InMemoryMetricReader,
    streamed: bool,
) -> None:
    with AnthropicServer() as server:
        server.add(anthropic_tool_use("add", {"a": 2, "b": 3}), anthropic_text("5"))
        agent = define_agent(name="adder", model="anthropic/claude-test", instructions="Add.", tools=[add])
        provider = AnthropicProvider(api_key="test-key", base_url=server.url, stream=streamed)
        async with running_worker(App(agents=[agent], models=[provider])):
            run = await chamvi.wait((await chamvi.dispatch("adder")).run_id)
    assert run.status == RunStatus.COMPLETED, run.error

    spans = spans_of_run(exporter, run.run_id)
    assert_rooted_in_invoke_agent(spans, "adder")
    # one span per model call: the SDK's instrumentation stands aside inside chamvi's
    chats = [s for s in spans.spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert [s.name for s in chats] == ["chat claude-test", "chat claude-test"]
    for chat in chats:
        attributes = dict(chat.attributes or {})
        assert (attributes["gen_ai.provider.name"], attributes["gen_ai.request.model"]) == (
            "anthropic",
            "claude-test",
        )
        assert (attributes["gen_ai.response.model"], attributes["gen_ai.response.id"]) == (
            "claude-test",
            "msg_test",
        )
    assert [dict(c.attributes or {})["gen_ai.usage.input_tokens"] for c in chats] == [10, 12]
    # nor does it count the tokens a second time
    metrics = anthropic_sdk_instrumented.get_metrics_data()
    counted = [
        m.name
        for r in (metrics.resource_metrics if metrics else [])
        for scope in r.scope_metrics
        for m in scope.metrics
        if m.data.data_points
    ]
    assert counted == []


async def test_an_openai_compatible_call_s_chat_span_names_the_model_that_answered(
    chamvi: ChamviClient, running_worker: Any, exporter: InMemorySpanExporter
) -> None:
    with OpenAIServer() as server:
        server.add(tool_call("add", {"a": 2, "b": 3}), text("5"))
        agent = define_agent(name="adder", model="ollama/llama3", instructions="Add.", tools=[add])
        provider = openai_compatible("ollama", base_url=server.url + "/v1")
        async with running_worker(App(agents=[agent], models=[provider])):
            run = await chamvi.wait((await chamvi.dispatch("adder")).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    chats = spans_of_run(exporter, run.run_id).named("chat llama3")
    assert len(chats) == 2
    for chat in chats:
        attributes = dict(chat.attributes or {})
        assert attributes["gen_ai.provider.name"] == "ollama"
        assert attributes["gen_ai.request.model"] == "llama3"
        assert (attributes["gen_ai.response.model"], attributes["gen_ai.response.id"]) == (
            "test-model",
            "chatcmpl-test",
        )
