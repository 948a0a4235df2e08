"""OpenTelemetry: GenAI spans around model and tool calls, the worker's metrics, and OTLP export.

Where the spans come from, so that one trace follows a run from the HTTP request to its last tool:

- FastAPI's own telemetry in the HTTP API: one server span per request, continuing the caller's
  ``traceparent``;
- temporalio's ``TracingInterceptor`` on the client (``client_interceptors``), and so on every worker
  built from that client: ``StartWorkflow``, ``RunWorkflow`` (one per run), ``StartActivity`` and
  ``RunActivity``, ``HandleSignal``..., carried across processes in Temporal's headers;
- ``ChamviTelemetry`` (added by ``ChamviPlugin``), inside each ``RunActivity`` span: ``chat <model>``,
  ``execute_tool <tool>`` and ``knowledge pass <collection>``, with the GenAI semantic conventions'
  attributes; ``KnowledgeSearch`` adds ``knowledge search``.

No span carries a message, a tool's arguments or result, a search query or a trigger payload unless
``capture_content`` is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``): traces often
go to a shared backend with looser access rules than the runs themselves. Errors are recorded by type
and code, never by message, for the same reason.

Metrics go through Temporal's runtime (``temporal_runtime``), so chamvi's counters sit beside
Temporal's own worker metrics on one Prometheus endpoint, or in one OTLP stream.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue
from temporalio import activity
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from chamvi import constants as c
from chamvi._spans import failed, span
from chamvi.app import App
from chamvi.errors import ChamviError, ChamviValidationError
from chamvi.models import CollectionMeta, ModelRequest, ModelResponse, PassRequest, ToolRequest, ToolResult
from chamvi.settings import Settings

if TYPE_CHECKING:
    from chamvi.runtime_agents import RuntimeAgents

# GenAI semantic conventions (opentelemetry.io/docs/specs/semconv/gen-ai/), spelled out here rather
# than imported from the incubating semconv package, whose names still move between releases
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_AGENT = "gen_ai.agent.name"
GEN_AI_CONVERSATION = "gen_ai.conversation.id"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_RESULT = "gen_ai.tool.call.result"


def client_interceptors(settings: Settings) -> list[ClientInterceptor]:
    """The client's interceptors: temporalio's tracing when traces are exported, else none.

    On the client, not the plugin, so the HTTP API's starts are traced too, and every worker built
    from the client gets it once. Workflow spans are made even for runs started without a span (a
    schedule, the ``temporal`` CLI), so every run has its ``RunWorkflow`` span.
    """
    if settings.otlp_endpoint is None:
        return []
    return [TracingInterceptor(always_create_workflow_spans=True)]


_ADDRESS = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")
_RUNTIMES: dict[tuple[object, ...], Runtime] = {}


def _metrics_config(settings: Settings) -> PrometheusConfig | OpenTelemetryConfig | None:
    if settings.metrics_address is not None:
        match = _ADDRESS.match(settings.metrics_address)
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise ChamviValidationError(
                f"CHAMVI_METRICS_ADDRESS {settings.metrics_address!r} is not host:port, e.g. '0.0.0.0:9464'"
            )
        return PrometheusConfig(bind_address=settings.metrics_address)
    if settings.otlp_endpoint is not None:
        return OpenTelemetryConfig(
            url=f"{settings.otlp_endpoint}/v1/metrics", headers=dict(settings.otlp_headers) or None, http=True
        )
    return None


def temporal_runtime(settings: Settings) -> Runtime | None:
    """The Temporal runtime exporting this process's metrics, or None for Temporal's default (none).

    A Prometheus endpoint at ``metrics_address`` when set, else OTLP over HTTP to ``otlp_endpoint``.
    One runtime per configuration and process: a second would bind the same port again.

    Raises:
        ChamviValidationError: ``metrics_address`` is not ``host:port``, or cannot be bound.
    """
    config = _metrics_config(settings)
    if config is None:
        return None
    key = (settings.metrics_address, settings.otlp_endpoint, settings.otlp_headers)
    runtime = _RUNTIMES.get(key)
    if runtime is None:
        try:
            runtime = Runtime(telemetry=TelemetryConfig(metrics=config))
        except Exception as error:  # the core reports a busy or foreign address as a plain error
            raise ChamviValidationError(
                f"cannot serve metrics at CHAMVI_METRICS_ADDRESS {settings.metrics_address!r} ({error}): "
                "choose a free port"
            ) from None
        _RUNTIMES[key] = runtime
    return runtime


@contextlib.contextmanager
def exporting_traces(settings: Settings, service: str) -> Iterator[None]:
    """Installs a tracer provider exporting by OTLP while the block runs, when ``otlp_endpoint`` is set.

    Spans are batched and the rest are flushed when the block ends. ``service`` is the
    ``service.name`` (``chamvi-worker``, ``chamvi-api``) unless ``OTEL_SERVICE_NAME`` names one;
    ``OTEL_RESOURCE_ATTRIBUTES`` adds to it, as OpenTelemetry's SDK reads them.
    """
    if settings.otlp_endpoint is None:
        yield
        return
    # the SDK and exporter load only for a process that exports
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(
                endpoint=f"{settings.otlp_endpoint}/v1/traces", headers=dict(settings.otlp_headers) or None
            )
        )
    )
    trace.set_tracer_provider(provider)
    try:
        yield
    finally:
        provider.shutdown()


def _content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


class ChamviTelemetry(Interceptor):
    """A worker interceptor: a GenAI span and metrics around each model call, tool call and pass.

    Args:
        app: the app served, to name each agent's model.
        capture_content: put messages, tool arguments and results on the spans.
        agents: the worker's agents, to name a runtime agent's model at the run's revision.
    """

    def __init__(
        self, app: App, *, capture_content: bool = False, agents: RuntimeAgents | None = None
    ) -> None:
        self.app = app
        self.capture_content = capture_content
        self.agents = agents

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wraps chamvi's model, tool and pass activities; others run as they are."""
        return _ActivityTelemetry(next, self)


class _ActivityTelemetry(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, root: ChamviTelemetry) -> None:
        super().__init__(next)
        self.root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = activity.info().activity_type
        request = input.args[0] if input.args else None
        if kind == c.ACTIVITY_CALL_MODEL and isinstance(request, ModelRequest):
            return await self._model(input, request)
        if kind == c.ACTIVITY_CALL_TOOL and isinstance(request, ToolRequest):
            return await self._tool(input, request)
        if kind == c.ACTIVITY_KNOWLEDGE_PASS and isinstance(request, PassRequest):
            return await self._pass(input, request)
        return await self.next.execute_activity(input)

    async def _model_ref(self, agent: str, revision: int | None) -> str | None:
        app, agents = self.root.app, self.root.agents
        try:
            if revision is not None and agents is not None:
                return app.model_for(await agents.agent(agent, revision))[0]
            return app.model_for(app.agent(agent))[0]
        except ChamviError:  # the activity itself reports an unknown agent
            return None

    async def _model(self, input: ExecuteActivityInput, request: ModelRequest) -> Any:
        ref = await self._model_ref(request.agent, request.revision) or "unknown"
        provider, _, model = ref.partition("/")
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION: "chat",
            GEN_AI_PROVIDER: provider,
            GEN_AI_REQUEST_MODEL: model or provider,
            GEN_AI_AGENT: request.agent,
            GEN_AI_CONVERSATION: request.run_id,
            "chamvi.step": request.step,
        }
        if self.root.capture_content:
            attributes[GEN_AI_INPUT_MESSAGES] = _content([m.model_dump(mode="json") for m in request.delta])
        with span(f"chat {model or provider}", attributes, SpanKind.CLIENT) as current:
            response = await self.next.execute_activity(input)
            if not isinstance(response, ModelResponse):
                return response
            usage = response.usage
            current.set_attributes(
                {
                    GEN_AI_INPUT_TOKENS: usage.input_tokens,
                    GEN_AI_OUTPUT_TOKENS: usage.output_tokens,
                    GEN_AI_FINISH_REASONS: [response.finish_reason],
                }
            )
            if self.root.capture_content:
                current.set_attribute(
                    GEN_AI_OUTPUT_MESSAGES, _content(response.message.model_dump(mode="json"))
                )
        tokens = activity.metric_meter().create_counter(
            c.METRIC_TOKENS, "Tokens the model provider reported."
        )
        labels = {"agent": request.agent, "model": ref}
        tokens.add(usage.input_tokens, {**labels, "direction": "input"})
        tokens.add(usage.output_tokens, {**labels, "direction": "output"})
        _count_step(request.agent, "llm")
        return response

    async def _tool(self, input: ExecuteActivityInput, request: ToolRequest) -> Any:
        call = request.call
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION: "execute_tool",
            GEN_AI_TOOL_NAME: call.name,
            GEN_AI_TOOL_CALL_ID: call.id,
            GEN_AI_TOOL_TYPE: "function",
            GEN_AI_AGENT: request.agent,
            GEN_AI_CONVERSATION: request.run_id,
            "chamvi.step": request.step,
            "chamvi.tainted": request.tainted,
            "chamvi.approval.decisions": len(request.decisions),
        }
        if self.root.capture_content:
            attributes[GEN_AI_TOOL_ARGUMENTS] = _content(call.arguments)
        with span(f"execute_tool {call.name}", attributes) as current:
            result = await self.next.execute_activity(input)
            if not isinstance(result, ToolResult):
                return result
            current.set_attribute("chamvi.tool.status", result.status)
            if result.error is not None:
                failed(current, result.error.code)
            if result.taint is not None:
                current.set_attribute("chamvi.taint", result.taint)
            if self.root.capture_content and result.status == "ok":
                current.set_attribute(GEN_AI_TOOL_RESULT, _content(result.output))
        if result.status != "approval":
            _count_step(request.agent, "tool")
        return result

    async def _pass(self, input: ExecuteActivityInput, request: PassRequest) -> Any:
        outcome = "error"
        started = time.monotonic()
        attributes: dict[str, AttributeValue] = {
            "chamvi.knowledge.collection": request.name,
            "chamvi.knowledge.failures": request.failures,
        }
        try:
            with span(f"knowledge pass {request.name}", attributes) as current:
                meta = await self.next.execute_activity(input)
                if isinstance(meta, CollectionMeta):
                    outcome = meta.status.value
                    current.set_attributes(_pass_attributes(meta))
                return meta
        finally:
            activity.metric_meter().create_histogram_timedelta(
                c.METRIC_KNOWLEDGE_PASS_DURATION, "How long one knowledge pass took.", "ms"
            ).record(
                timedelta(seconds=time.monotonic() - started),
                {"collection": request.name, "outcome": outcome},
            )


def _pass_attributes(meta: CollectionMeta) -> Mapping[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "chamvi.knowledge.status": meta.status.value,
        "chamvi.knowledge.documents": meta.documents,
        "chamvi.knowledge.passages": meta.passages,
    }
    if meta.generation is not None:
        attributes["chamvi.knowledge.generation"] = meta.generation
    if meta.model is not None:
        attributes["chamvi.knowledge.model"] = meta.model
    return attributes


def _count_step(agent: str, kind: str) -> None:
    activity.metric_meter().create_counter(c.METRIC_STEPS, "Model calls and finished tool calls.").add(
        1, {"agent": agent, "kind": kind}
    )
