"""Telemetry settings: what turns export on, and the errors a wrong value gets; a run span's ids."""

from __future__ import annotations

import socket

import pytest
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig

from chamvi.errors import ChamviValidationError
from chamvi.settings import Settings
from chamvi.telemetry._otel import OPERATION_DURATION_BUCKETS as DURATIONS
from chamvi.telemetry._otel import TOKEN_USAGE_BUCKETS, _metrics_config, client_interceptors, temporal_runtime
from chamvi.telemetry._workflow_spans import run_span


def test_the_environment_turns_export_metrics_and_content_on() -> None:
    settings = Settings.from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "CHAMVI_METRICS_ADDRESS": "0.0.0.0:9464",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "True",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=ab%3Dc, x-team = ops,",
        }
    )
    assert settings.otlp_headers == (("x-api-key", "ab=c"), ("x-team", "ops"))
    assert settings.otlp_endpoint == "http://collector:4318"
    assert settings.metrics_address == "0.0.0.0:9464"
    assert settings.trace_content is True
    assert Settings.from_env({}) == Settings()
    assert Settings().trace_content is False


def test_a_content_flag_that_is_not_a_boolean_is_refused_by_name() -> None:
    with pytest.raises(
        ChamviValidationError, match="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT='yes please'"
    ):
        Settings.from_env({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "yes please"})


@pytest.mark.parametrize("headers", ["x-api-key", "=value", "a=1,b"])
def test_otlp_headers_that_are_not_key_value_pairs_are_refused_by_name(headers: str) -> None:
    with pytest.raises(
        ChamviValidationError, match=r"OTEL_EXPORTER_OTLP_HEADERS has .*: write key=value pairs"
    ):
        Settings.from_env({"OTEL_EXPORTER_OTLP_HEADERS": headers})


def test_the_client_is_traced_only_when_spans_are_exported() -> None:
    assert client_interceptors(Settings()) == []
    (interceptor,) = client_interceptors(Settings(otlp_endpoint="http://collector:4318"))
    assert isinstance(interceptor, TracingInterceptor)


def test_metrics_go_to_prometheus_when_it_has_an_address_else_by_otlp_else_nowhere() -> None:
    assert _metrics_config(Settings()) is None
    assert temporal_runtime(Settings()) is None
    both = Settings(metrics_address="127.0.0.1:9464", otlp_endpoint="http://collector:4318")
    buckets = {
        "gen_ai.client.token.usage": TOKEN_USAGE_BUCKETS,
        "gen_ai.client.operation.duration": DURATIONS,
    }
    prometheus = {name.replace(".", "_"): bounds for name, bounds in buckets.items()}
    assert _metrics_config(both) == PrometheusConfig(
        bind_address="127.0.0.1:9464", histogram_bucket_overrides=prometheus
    )
    assert _metrics_config(Settings(otlp_endpoint="http://collector:4318")) == OpenTelemetryConfig(
        url="http://collector:4318/v1/metrics", http=True, histogram_bucket_overrides=buckets
    )
    keyed = Settings(otlp_endpoint="http://collector:4318", otlp_headers=(("x-api-key", "k"),))
    assert _metrics_config(keyed) == OpenTelemetryConfig(
        url="http://collector:4318/v1/metrics",
        headers={"x-api-key": "k"},
        http=True,
        histogram_bucket_overrides=buckets,
    )


@pytest.mark.parametrize("address", ["9464", "localhost", "0.0.0.0:", "0.0.0.0:99999", "http://0.0.0.0:9464"])
def test_a_metrics_address_that_is_not_host_and_port_is_refused_with_an_example(address: str) -> None:
    with pytest.raises(ChamviValidationError, match=r"is not host:port, e.g. '0.0.0.0:9464'"):
        temporal_runtime(Settings(metrics_address=address))


def test_a_metrics_address_already_in_use_is_refused_with_what_to_do() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(
            ChamviValidationError,
            match=f"cannot serve metrics at CHAMVI_METRICS_ADDRESS '{address}'.*choose a free port",
        ):
            temporal_runtime(Settings(metrics_address=address))


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = {"traceparent": f"00-{CALLER_TRACE}-00f067aa0ba902b7-00", "baggage": "tenant=acme"}


def test_a_run_span_has_the_same_ids_on_every_worker_and_the_caller_s_trace_and_sampling() -> None:
    alone = run_span("run-1", "r1", None)
    assert alone == run_span("run-1", "r1", None)  # a worker that replays the run derives the same
    assert alone.parent is None and alone.flags == 1
    assert run_span("run-1", "r2", None).trace_id != alone.trace_id  # a reset run is another trace
    called = run_span("run-1", "r1", CALLER)
    assert (called.trace_id, called.span_id, called.flags) == (int(CALLER_TRACE, 16), alone.span_id, 0)
    carrier = called.carrier()
    assert carrier["traceparent"] == f"00-{CALLER_TRACE}-{alone.span_id:016x}-00"
    assert carrier["baggage"] == "tenant=acme"  # the caller's baggage goes on with the run


@pytest.mark.parametrize(
    "traceparent",
    ["", "not a traceparent", f"00-{'0' * 32}-00f067aa0ba902b7-01", f"00-{CALLER_TRACE}-{'0' * 16}-01"],
)
def test_a_run_started_with_no_valid_trace_context_is_the_root_of_its_own_trace(traceparent: str) -> None:
    assert run_span("run-1", "r1", {"traceparent": traceparent}) == run_span("run-1", "r1", None)
