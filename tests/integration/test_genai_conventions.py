"""Spans and metrics against the OpenTelemetry GenAI semantic conventions, through an OTLP receiver.

A worker process exports the way the README documents (``OTEL_EXPORTER_OTLP_ENDPOINT``): spans by the
SDK's OTLP/HTTP exporter, metrics by Temporal's runtime; the test is the collector, and reads what
arrives as the OTLP protobuf messages a backend would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from temporalio.testing import WorkflowEnvironment

from chamvi.telemetry._otel import OPERATION_DURATION_BUCKETS, TOKEN_USAGE_BUCKETS
from tests.polling import eventually
from tests.support.otlp_collector import Collector

ROOT = Path(__file__).resolve().parents[2]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def spans_of(collector: Collector) -> list[Span]:
    found: list[Span] = []
    for body in collector.bodies("/v1/traces"):
        request = ExportTraceServiceRequest.FromString(body)
        found.extend(s for r in request.resource_spans for scope in r.scope_spans for s in scope.spans)
    return found


def metrics_of(collector: Collector) -> Iterator[Metric]:
    for body in collector.bodies("/v1/metrics"):
        request = ExportMetricsServiceRequest.FromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                yield from scope.metrics


async def test_a_runs_spans_and_metrics_follow_the_genai_conventions_through_an_otlp_receiver(
    temporal_env: WorkflowEnvironment,
) -> None:
    collector = Collector()
    target = temporal_env.client.config()["service_client"].config.target_host
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "TEMPORAL_ADDRESS": target,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.genai_probe"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        run_id, status = process.stdout.readline().split()
        assert status == "completed"

        async def exported() -> bool | None:
            names = {s.name for s in spans_of(collector)}
            metrics = {m.name for m in metrics_of(collector)}
            wanted = {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"}
            return True if "invoke_agent adder" in names and wanted <= metrics else None

        await eventually(exported, "the run's spans and the GenAI metrics reaching the collector", seconds=60)
    finally:
        process.terminate()
        process.wait()
        collector.close()

    spans = spans_of(collector)
    (agent,) = [s for s in spans if s.name == "invoke_agent adder"]
    invoked = attributes(agent.attributes)
    assert invoked["gen_ai.operation.name"] == "invoke_agent"
    assert (invoked["gen_ai.agent.name"], invoked["chamvi.run.id"]) == ("adder", run_id)
    assert "gen_ai.conversation.id" not in invoked  # a run is no conversation; a turn of one would be
    assert (invoked["gen_ai.provider.name"], invoked["gen_ai.request.model"]) == ("openai", "test-model")
    assert (invoked["gen_ai.usage.input_tokens"], invoked["gen_ai.usage.output_tokens"]) == (22, 10)
    assert agent.kind == Span.SpanKind.SPAN_KIND_INTERNAL
    chats = sorted((s for s in spans if s.name == "chat test-model"), key=lambda s: s.start_time_unix_nano)
    assert len(chats) == 2
    assert agent.start_time_unix_nano <= chats[0].start_time_unix_nano
    assert chats[-1].end_time_unix_nano <= agent.end_time_unix_nano  # it spans the run
    assert agent.trace_id == chats[0].trace_id
    chat = attributes(chats[0].attributes)
    assert chats[0].kind == Span.SpanKind.SPAN_KIND_CLIENT
    assert chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.request.model"], chat["gen_ai.response.model"]) == ("test-model", "test-model")
    assert chat["gen_ai.response.id"] == "chatcmpl-test"
    assert chat["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (chat["server.address"], chat["server.port"]) == ("127.0.0.1", int(chat["server.port"]))
    assert chat["server.port"] > 0
    (tool,) = [s for s in spans if s.name == "execute_tool add"]
    executed = attributes(tool.attributes)
    assert (executed["gen_ai.operation.name"], executed["gen_ai.tool.name"]) == ("execute_tool", "add")
    assert executed["gen_ai.tool.call.id"] == "call_1"
    assert (executed["gen_ai.tool.type"], executed["chamvi.run.id"]) == ("function", run_id)
    assert tool.kind == Span.SpanKind.SPAN_KIND_INTERNAL

    metrics = {m.name: m for m in metrics_of(collector)}
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    points = usage.histogram.data_points
    by_type = {attributes(p.attributes)["gen_ai.token.type"]: p for p in points}
    assert set(by_type) == {"input", "output"}
    assert (by_type["input"].sum, by_type["output"].sum) == (22, 10)
    assert tuple(by_type["input"].explicit_bounds) == TOKEN_USAGE_BUCKETS
    labels = attributes(by_type["input"].attributes)
    assert labels["gen_ai.operation.name"] == "chat"
    assert (labels["gen_ai.provider.name"], labels["gen_ai.request.model"]) == ("openai", "test-model")
    assert (labels["gen_ai.response.model"], labels["server.address"]) == ("test-model", "127.0.0.1")
    assert "namespace" not in labels and "task_queue" not in labels  # the conventions' set only
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    (point,) = duration.histogram.data_points
    assert point.count == 2 and tuple(point.explicit_bounds) == OPERATION_DURATION_BUCKETS
