"""OpenTelemetry: GenAI spans around model and tool calls, the worker's metrics, and OTLP export.

Where the spans come from, so that one trace follows a run from the HTTP request to its last tool:

- FastAPI's own telemetry in the HTTP API: one server span per request, continuing the caller's
  ``traceparent``;
- temporalio's ``TracingInterceptor`` on the client (``client_interceptors``), and so on every worker
  built from that client: ``StartWorkflow``, ``RunWorkflow`` (one per run), ``StartActivity`` and
  ``RunActivity``, ``HandleSignal``..., carried across processes in Temporal's headers;
- ``ChamviTelemetry`` (added by ``ChamviPlugin``), inside each ``RunActivity`` span: ``chat <model>``,
  ``execute_tool <tool>`` and ``knowledge pass <collection>``, with the GenAI semantic conventions'
  attributes; ``KnowledgeSearch`` adds ``knowledge search``;
- ``invoke_agent <agent>`` for each run, with the run's real start and end, made when the run ends
  (``chamvi.telemetry._workflow_spans``) with ids known from the run's start, so that every other span of the
  run hangs under it: the root of the run's trace, or under the caller's span when the run was
  started inside one.

A model SDK's own OpenTelemetry instrumentation (OpenLLMetry's ``opentelemetry-instrumentation-anthropic``
or ``-openai``, OpenInference's, ...) would make a second chat span and count the tokens again for
the call chamvi's ``chat`` span already describes: inside that span, instrumentation is suppressed
by the context keys those libraries honour.

The conventions' metrics ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``
(histograms with the conventions' attributes and bucket boundaries) are recorded for each model
call, beside chamvi's own.

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
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue
from temporalio import activity
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.common import MetricMeter
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from chamvi import _constants as c
from chamvi.app import App
from chamvi.errors import ChamviError, ChamviValidationError
from chamvi.models import (
    CollectionMeta,
    ModelRequest,
    ModelResponse,
    PassRequest,
    ToolRequest,
    ToolResult,
    Usage,
)
from chamvi.settings import Settings
from chamvi.telemetry._genai_messages import input_messages, output_messages
from chamvi.telemetry._spans import ERROR_TYPE, failed, span
from chamvi.telemetry._workflow_spans import (
    INVOKE_AGENT_EXTERN,
    AgentRunSpans,
    RunEnded,
    RunSpan,
    conversation_id,
    header_carrier,
)

if TYPE_CHECKING:
    from chamvi.dynamic_agents import RuntimeAgents
    from chamvi.providers import ChatModel

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
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
CHAMVI_RUN_ID = "chamvi.run.id"
"""The run a span belongs to; a run is not a conversation (``gen_ai.conversation.id``), a turn of one is."""

METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE_BUCKETS = tuple(4**n for n in range(14))  # 1, 4, 16, ... 67108864
"""The conventions' ``ExplicitBucketBoundaries`` of ``gen_ai.client.token.usage``."""
OPERATION_DURATION_BUCKETS = tuple(round(0.01 * 2**n, 2) for n in range(14))  # 0.01, 0.02, ... 81.92
"""The conventions' ``ExplicitBucketBoundaries`` of ``gen_ai.client.operation.duration`` (seconds)."""
GEN_AI_BUCKETS: Mapping[str, Sequence[float]] = {
    METRIC_TOKEN_USAGE: TOKEN_USAGE_BUCKETS,
    METRIC_OPERATION_DURATION: OPERATION_DURATION_BUCKETS,
}


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
_OTLP_RUNTIMES: set[int] = set()
"""The runtimes chamvi built to export by OTLP, where metric names keep the conventions' dots."""


def prometheus_name(name: str) -> str:
    """A conventions' metric name as Prometheus spells it (``gen_ai_client_token_usage``)."""
    return name.replace(".", "_")


def _metrics_config(settings: Settings) -> PrometheusConfig | OpenTelemetryConfig | None:
    if settings.metrics_address is not None:
        match = _ADDRESS.match(settings.metrics_address)
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise ChamviValidationError(
                f"CHAMVI_METRICS_ADDRESS {settings.metrics_address!r} is not host:port, e.g. '0.0.0.0:9464'"
            )
        return PrometheusConfig(
            bind_address=settings.metrics_address,
            histogram_bucket_overrides={prometheus_name(k): v for k, v in GEN_AI_BUCKETS.items()},
        )
    if settings.otlp_endpoint is not None:
        return OpenTelemetryConfig(
            url=f"{settings.otlp_endpoint}/v1/metrics",
            headers=dict(settings.otlp_headers) or None,
            http=True,
            histogram_bucket_overrides=dict(GEN_AI_BUCKETS),
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
        if isinstance(config, OpenTelemetryConfig):
            _OTLP_RUNTIMES.add(id(runtime))
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

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        """Each ``AgentRun`` reports its end to :meth:`invoke_agent_span`, which makes its span."""
        input.unsafe_extern_functions[INVOKE_AGENT_EXTERN] = self.invoke_agent_span
        return AgentRunSpans

    def model_ref(self, agent: str) -> str | None:
        """The model ref the agent runs on, or None for an agent the app does not serve."""
        try:
            return self.app.model_for(self.app.agent(agent))[0]
        except ChamviError:  # the activity itself reports an unknown agent
            return None

    def invoke_agent_span(self, run: RunEnded) -> None:
        """The run's ``invoke_agent`` span, from its start to its end, with the ids its run derived.

        Under the caller's span when the run was started inside one, else the root of its trace.
        """
        ref = self.model_ref(run.agent) or "unknown"
        provider, _, model = ref.partition("/")
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION: "invoke_agent",
            GEN_AI_PROVIDER: provider,
            GEN_AI_REQUEST_MODEL: model or provider,
            GEN_AI_AGENT: run.agent,
            GEN_AI_AGENT_ID: run.agent,
            **({GEN_AI_CONVERSATION: run.conversation_id} if run.conversation_id else {}),
            CHAMVI_RUN_ID: run.run_id,
            GEN_AI_INPUT_TOKENS: run.input_tokens,
            GEN_AI_OUTPUT_TOKENS: run.output_tokens,
            "chamvi.run.status": run.status,
        }
        parent = _W3C.extract(run.span.parent) if run.span.parent else Context()
        with _ids_of(run.span):
            current = _run_tracer().start_span(
                f"invoke_agent {run.agent}",
                parent,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=run.start_ns,
            )
        if run.error is not None:
            failed(current, run.error)
        current.end(end_time=max(run.end_ns, run.start_ns))


_W3C = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
"""What temporalio's ``TracingInterceptor`` writes in its header, whatever the global propagator."""

_RUN_SPAN: ContextVar[RunSpan | None] = ContextVar("chamvi_run_span", default=None)
_SUPPRESS_LANGUAGE_MODEL_INSTRUMENTATION = "suppress_language_model_instrumentation"
"""OpenLLMetry's key (``opentelemetry.semconv_ai``): its model SDK instrumentations stand aside."""


class _RunSpanIds(IdGenerator):
    """A tracer's id generator that gives the span being made the ids its run derived, else its own.

    The SDK makes a span's ids with its tracer's generator, and offers no other way to give a span
    ids chosen before (``invoke_agent``'s, which the run's other spans already name as their parent).
    """

    def __init__(self, ids: IdGenerator) -> None:
        self.ids = ids

    def generate_span_id(self) -> int:
        """The run span's id while it is being made, else the tracer's own."""
        run = _RUN_SPAN.get()
        return run.span_id if run is not None else int(self.ids.generate_span_id())

    def generate_trace_id(self) -> int:
        """The run span's trace id while it is being made, else the tracer's own."""
        run = _RUN_SPAN.get()
        return run.trace_id if run is not None else int(self.ids.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        """The tracer's own answer; a run's trace id is a hash, of no random bits W3C could vouch for."""
        return _RUN_SPAN.get() is None and self.ids.is_trace_id_random()


def _run_tracer() -> trace.Tracer:
    """The ``chamvi`` tracer of the installed provider, whose generator gives a run span its own ids.

    An SDK tracer (one with an ``IdGenerator``) is given :class:`_RunSpanIds` once; another
    provider's tracer makes the span with ids of its own, outside the run's trace.
    """
    tracer = trace.get_tracer_provider().get_tracer("chamvi")
    ids = getattr(tracer, "id_generator", None)
    if isinstance(ids, IdGenerator) and not isinstance(ids, _RunSpanIds):
        tracer.id_generator = _RunSpanIds(ids)  # type: ignore[attr-defined]
    return tracer


@contextlib.contextmanager
def _ids_of(run: RunSpan) -> Iterator[None]:
    token = _RUN_SPAN.set(run)
    try:
        yield
    finally:
        _RUN_SPAN.reset(token)


def _run_context(input: ExecuteActivityInput) -> Context | None:
    """Where chamvi's span of an activity starts: None for the current span, else the run's span.

    The current span is temporalio's ``RunActivity`` when a tracing interceptor runs on the worker,
    already in the run's trace; without one, the run's context comes in the activity's header
    (``chamvi.telemetry._workflow_spans``), and whatever span is current belongs to another trace.
    """
    carrier = header_carrier(input.headers)
    if carrier is None:
        return None
    context = _W3C.extract(carrier)
    run_trace = trace.get_current_span(context).get_span_context().trace_id
    if trace.get_current_span().get_span_context().trace_id == run_trace:
        return None
    return context


@contextlib.contextmanager
def _sdk_instrumentation_suppressed() -> Iterator[None]:
    """The block runs with the model SDKs' own instrumentation standing aside (module docstring).

    OpenTelemetry's ``suppress_instrumentation`` key is the one every contrib instrumentation and
    OpenInference honour; OpenLLMetry's read theirs as well. An HTTP client's instrumentation stands
    aside with them: the ``chat`` span times the call.
    """
    context = otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True)
    context = otel_context.set_value(_SUPPRESS_LANGUAGE_MODEL_INSTRUMENTATION, True, context)
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def _conversation(request: object) -> dict[str, AttributeValue]:
    """``gen_ai.conversation.id`` of a model call that is a turn of a conversation, else nothing.

    Read from the request's ``conversation`` when it has one (``ModelRequest.conversation.id``, which
    conversations add; see :func:`chamvi.telemetry._workflow_spans.conversation_id`).
    """
    found = conversation_id(request)
    return {GEN_AI_CONVERSATION: found} if found else {}


def _server(model: ChatModel) -> dict[str, AttributeValue]:
    """``server.address`` and ``server.port`` of a chat model's calls, when its provider says."""
    server = getattr(model, "server", None)
    if not (isinstance(server, tuple) and len(server) == 2):
        return {}
    return {SERVER_ADDRESS: str(server[0]), SERVER_PORT: int(server[1])}


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

    async def _model_of(self, agent: str, revision: int | None) -> tuple[str, ChatModel] | None:
        """The agent's model ref and model object (a runtime agent's revision's); None if unknown."""
        app, agents = self.root.app, self.root.agents
        try:
            if revision is not None and agents is not None:
                return app.model_for(await agents.agent(agent, revision))
            return app.model_for(app.agent(agent))
        except ChamviError:  # the activity itself reports an unknown agent
            return None

    async def _model(self, input: ExecuteActivityInput, request: ModelRequest) -> Any:
        found = await self._model_of(request.agent, request.revision)
        ref = found[0] if found is not None else "unknown"
        provider, _, model = ref.partition("/")
        server = _server(found[1]) if found is not None else {}
        conventional: dict[str, AttributeValue] = {
            GEN_AI_OPERATION: "chat",
            GEN_AI_PROVIDER: provider,
            GEN_AI_REQUEST_MODEL: model or provider,
            **server,
        }
        attributes: dict[str, AttributeValue] = {
            **conventional,
            GEN_AI_AGENT: request.agent,
            **_conversation(request),
            CHAMVI_RUN_ID: request.run_id,
            "chamvi.step": request.step,
        }
        if self.root.capture_content:
            attributes[GEN_AI_INPUT_MESSAGES] = input_messages(request.delta)
        started = time.monotonic()
        try:
            parent = _run_context(input)
            with span(f"chat {model or provider}", attributes, SpanKind.CLIENT, parent) as current:
                with _sdk_instrumentation_suppressed():
                    response = await self.next.execute_activity(input)
                if not isinstance(response, ModelResponse):
                    return response
                usage = response.usage
                if response.response_model:
                    conventional[GEN_AI_RESPONSE_MODEL] = response.response_model
                current.set_attributes(
                    {
                        GEN_AI_INPUT_TOKENS: usage.input_tokens,
                        GEN_AI_OUTPUT_TOKENS: usage.output_tokens,
                        GEN_AI_FINISH_REASONS: [response.finish_reason],
                        **({GEN_AI_RESPONSE_ID: response.response_id} if response.response_id else {}),
                        **conventional,
                    }
                )
                if self.root.capture_content:
                    current.set_attribute(
                        GEN_AI_OUTPUT_MESSAGES, output_messages(response.message, response.finish_reason)
                    )
        except BaseException as error:
            failure = {ERROR_TYPE: str(getattr(error, "code", type(error).__name__))}
            _record_duration(started, {**conventional, **failure})
            raise
        _record_duration(started, conventional)
        _record_tokens(usage, conventional)
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
            # an MCP server's tool calls out of the agent's process: the conventions' "extension"
            GEN_AI_TOOL_TYPE: "extension" if request.mcp_server is not None else "function",
            GEN_AI_AGENT: request.agent,
            CHAMVI_RUN_ID: request.run_id,
            "chamvi.step": request.step,
            "chamvi.tainted": request.tainted,
            "chamvi.approval.decisions": len(request.decisions),
        }
        if request.mcp_server is not None:
            attributes["chamvi.mcp.server"] = request.mcp_server
        if self.root.capture_content:
            attributes[GEN_AI_TOOL_ARGUMENTS] = _content(call.arguments)
        with span(f"execute_tool {call.name}", attributes, context=_run_context(input)) as current:
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


def _meter() -> tuple[MetricMeter, bool]:
    """The process's meter, and whether its names must be Prometheus's.

    Not the activity's own meter: the conventions' metrics carry their attribute sets, not the
    namespace and task queue Temporal adds to it. Prometheus refuses dots in names (Temporal's
    runtime drops such a metric), and a runtime does not tell where it exports: the conventions'
    names go out as they are on the OTLP runtime chamvi builds (``OTEL_EXPORTER_OTLP_ENDPOINT``),
    and as Prometheus spells them (``gen_ai_client_token_usage``) on any other.
    """
    runtime = activity.client().service_client.config.runtime or Runtime.default()
    return runtime.metric_meter, id(runtime) not in _OTLP_RUNTIMES


def _record_duration(started: float, attributes: Mapping[str, AttributeValue]) -> None:
    meter, prometheus = _meter()
    name = prometheus_name(METRIC_OPERATION_DURATION) if prometheus else METRIC_OPERATION_DURATION
    meter.create_histogram_float(name, "GenAI operation duration.", "s").record(
        time.monotonic() - started, _metric_attributes(attributes, prometheus)
    )


def _record_tokens(usage: Usage, attributes: Mapping[str, AttributeValue]) -> None:
    meter, prometheus = _meter()
    name = prometheus_name(METRIC_TOKEN_USAGE) if prometheus else METRIC_TOKEN_USAGE
    histogram = meter.create_histogram(name, "Number of input and output tokens used.", "{token}")
    attributes = _metric_attributes(attributes, prometheus)
    token_type = prometheus_name(GEN_AI_TOKEN_TYPE) if prometheus else GEN_AI_TOKEN_TYPE
    histogram.record(usage.input_tokens, {**attributes, token_type: "input"})
    histogram.record(usage.output_tokens, {**attributes, token_type: "output"})


def _metric_attributes(
    attributes: Mapping[str, AttributeValue], prometheus: bool
) -> dict[str, str | int | float | bool]:
    return {
        prometheus_name(k) if prometheus else k: v
        for k, v in attributes.items()
        if isinstance(v, str | int | float | bool)
    }
