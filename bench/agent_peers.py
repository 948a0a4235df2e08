"""Concurrent agent runs, chamvi against the OpenAI Agents SDK on temporalio's integration (issue 28).

Starts one Temporal dev server and one loopback OpenAI-compatible model server
(``_loopback_model.py``, its own process), then, per round, one burst per side: ``--runs`` runs
started at once, each of ``--steps`` steps where the model calls the tool ``fetch_page`` and a final
answer. Each burst runs in a fresh child process of this script (``--side``) with its own client and
worker, so the process CPU it reports is that side's client and worker alone, measured the same way
for every side. The sides are the peer (``_agents_peer.py``; measured only with the ``bench`` extra),
chamvi at its default per-worker cap on runs executing at once (``max_runs`` 4) and chamvi at
``max_runs`` equal to the runs (what a user with that many concurrent runs sets with
``CHAMVI_MAX_RUNS``). The order of the sides reverses every round; each figure is the median over
the rounds.

Usage: ``python bench/agent_peers.py`` (about 4 minutes on 2 busy cores), ``--quick`` (a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from _agent_workload import API_KEY, INSTRUCTIONS, MODEL, Burst, burst, page_text
from _common import leave, ratio, table
from _server import dev_server, machine, options, temporal_path
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from chamvi import App, Budget, ChamviClient, ChamviPlugin, define_agent, tool
from chamvi._lifecycle import memory_index
from chamvi._run_slots import DEFAULT_MAX_RUNS
from chamvi.artifacts import ArtifactStore
from chamvi.models import RunStatus, RunView
from chamvi.providers import OpenAIProvider
from chamvi.runtime import build_worker

ROOT = Path(__file__).resolve().parents[1]
PEER_SIDE = "peer"


@dataclass(frozen=True)
class Plan:
    runs: int
    steps: int
    rounds: int


@tool
async def fetch_page(page: int) -> str:
    """Returns the text of ``page``."""
    return page_text(page)


async def measure_chamvi(
    address: str, model_url: str, plan: Plan, max_runs: int, others: list[int], profile: str | None
) -> Burst:
    """One warm-up run, then the burst, on a client and worker of this process's own."""
    provider = OpenAIProvider(api_key=API_KEY, base_url=model_url)
    provider.stream = False  # the peer's non-streamed Runner.run sends non-streamed requests
    agent = define_agent(
        name="reader",
        model=f"openai/{MODEL}",
        instructions=INSTRUCTIONS,
        tools=[fetch_page],
        budget=Budget(max_steps=plan.steps + 5),
    )
    app = App(agents=[agent], models=[provider])
    plugin = ChamviPlugin(
        app,
        index=memory_index(),
        start_collections=False,
        artifacts=ArtifactStore.memory(),
        max_runs=max_runs,
    )
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    task_queue = f"bench-agent-peers-{uuid.uuid4().hex[:8]}"
    chamvi = ChamviClient(client, task_queue=task_queue)

    async def start() -> str:
        return (await chamvi.dispatch("reader")).run_id

    async def finish(run_id: str) -> None:
        view = await client.get_workflow_handle(run_id, result_type=RunView).result()
        if view.status != RunStatus.COMPLETED:
            raise RuntimeError(f"run {run_id!r} ended {view.status.value}: {view.error}")

    async with build_worker(client, plugin, task_queue=task_queue):
        await finish(await start())
        return await burst(
            client, start, finish, runs=plan.runs, steps=plan.steps, others=others, profile=profile
        )


# ---- the parent: servers, rounds, tables ------------------------------------------------------------


def sides(peer: bool, runs: int) -> list[str]:
    chamvi = list(dict.fromkeys([f"chamvi max_runs={DEFAULT_MAX_RUNS}", f"chamvi max_runs={runs}"]))
    return [PEER_SIDE, *chamvi] if peer else chamvi


def server_pid() -> int:
    """The dev server this process started: its child whose command line says ``start-dev``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"start-dev" in command:
            return int(stat.parent.name)
    raise RuntimeError("the dev server's process was not found")


def run_side(
    side: str, address: str, model_url: str, plan: Plan, others: list[int], profile: str | None
) -> Burst:
    command = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--address",
        address,
        "--model-url",
        model_url,
        "--runs",
        str(plan.runs),
        "--steps",
        str(plan.steps),
        "--others",
        ",".join(map(str, others)),
        *(["--profile", profile] if profile else []),
    ]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"side {side!r} failed:\n{out.stderr[-4000:]}")
    return Burst(**json.loads(out.stdout.strip().splitlines()[-1]))


@dataclass(frozen=True)
class Row:
    side: str
    wall: float
    steps_per_s: float
    cpu_ms: float
    server_ms: float
    model_ms: float
    history: int
    events: int
    tasks: int
    parts: dict[str, list[float]]


def summarise(side: str, bursts: list[Burst]) -> Row:
    steps = bursts[0].runs * bursts[0].steps
    med = statistics.median
    names = bursts[0].parts
    return Row(
        side=side,
        wall=med(b.wall for b in bursts),
        steps_per_s=med(steps / b.wall for b in bursts),
        cpu_ms=med(b.cpu * 1000 / steps for b in bursts),
        server_ms=med(b.server_cpu * 1000 / steps for b in bursts),
        model_ms=med(b.model_cpu * 1000 / steps for b in bursts),
        history=int(med(b.history_bytes for b in bursts)),
        events=int(med(b.events for b in bursts)),
        tasks=int(med(b.tasks for b in bursts)),
        parts={name: [med(b.parts[name][i] for b in bursts) for i in range(4)] for name in names},
    )


async def main(plan: Plan, profile: str | None) -> None:
    from _agents_peer import MISSING, PEER

    path = temporal_path()
    print(
        f"agent_peers: {plan.runs} runs at once of {plan.steps} steps (a tool call each, then an answer), "
        f"{plan.rounds} rounds"
    )
    print(f"machine: {machine()}")
    if MISSING:
        print(f"peer not measured: {MISSING}; chamvi alone")
    names = sides(MISSING is None, plan.runs)
    model = subprocess.Popen(
        [sys.executable, "-m", "bench._loopback_model", str(plan.steps)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert model.stdout is not None
        model_url = model.stdout.readline().strip()
        async with dev_server(path) as client:
            address = client.service_client.config.target_host
            others = [server_pid(), model.pid]
            bursts: dict[str, list[Burst]] = {name: [] for name in names}
            for index in range(plan.rounds):
                for name in names if index % 2 == 0 else names[::-1]:
                    spied = f"{profile}/{name.replace(' ', '-')}-{index + 1}.txt" if profile else None
                    result = await asyncio.to_thread(run_side, name, address, model_url, plan, others, spied)
                    bursts[name].append(result)
                    print(f"  round {index + 1}: {name}: {result.wall:.2f} s", flush=True)
    finally:
        model.communicate(timeout=10)
    print(f"after: {machine()}")
    rows = [summarise(name, bursts[name]) for name in names]
    print(
        "\nPer side, medians. CPU ms/step: the side's own process (its client and worker, every thread);\n"
        "the Temporal server's and the model server's CPU are apart, in their own columns (the server's\n"
        "includes whatever else it served meanwhile)."
    )
    print(
        table(
            ["side", "wall s", "steps/s", "CPU ms/step", "server ms/step", "model ms/step", "history B/run"],
            [[r.side, r.wall, r.steps_per_s, r.cpu_ms, r.server_ms, r.model_ms, r.history] for r in rows],
        )
    )
    print(
        "\nWhere an activity round trip's time goes (ms, medians over every activity of the side, from\n"
        "history timestamps): its wait for a worker, its run, then the next workflow task's wait and run."
    )
    print(
        table(
            [
                "side / activity",
                "act wait",
                "act run",
                "wf task wait",
                "wf task run",
                "events/run",
                "wf tasks/run",
            ],
            [
                row
                for r in rows
                for row in (
                    [r.side, None, None, None, None, r.events, r.tasks],
                    *([f"  {name}", *part, None, None] for name, part in r.parts.items()),
                )
            ],
        )
    )
    if MISSING:
        return
    peer = rows[0]
    print(f"\nchamvi / {PEER} (steps/s above 1.00x: chamvi faster; CPU below 1.00x: chamvi cheaper)")
    print(
        table(
            ["chamvi side", "steps/s", "CPU ms/step", "CPU less by", "server ms/step", "history B/run"],
            [
                [
                    r.side,
                    ratio(r.steps_per_s, peer.steps_per_s),
                    ratio(r.cpu_ms, peer.cpu_ms),
                    ratio(peer.cpu_ms, r.cpu_ms),
                    ratio(r.server_ms, peer.server_ms),
                    ratio(r.history, peer.history),
                ]
                for r in rows[1:]
            ],
        )
    )
    print("target (issue 28): steps/s at least 1.00x and CPU less by at least 1.30x")


async def side_main(arguments: argparse.Namespace) -> None:
    plan = Plan(runs=arguments.runs, steps=arguments.steps, rounds=1)
    others = [int(pid) for pid in arguments.others.split(",")]
    if arguments.side == PEER_SIDE:
        from _agents_peer import measure

        result = await measure(
            arguments.address, arguments.model_url, plan.runs, plan.steps, others, arguments.profile
        )
    else:
        max_runs = int(arguments.side.rsplit("=", 1)[1])
        result = await measure_chamvi(
            arguments.address, arguments.model_url, plan, max_runs, others, arguments.profile
        )
    print(json.dumps(result.as_dict()))


if __name__ == "__main__":
    parser = options(__doc__, "1 round of 4 runs of 2 steps")
    parser.add_argument("--runs", type=int, default=30, help="runs started at once (default 30)")
    parser.add_argument("--steps", type=int, default=10, help="tool steps per run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="bursts per side (default 3)")
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy samples each burst into DIR/<side>-<round>.txt (collapsed)"
    )
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--model-url", help=argparse.SUPPRESS)
    parser.add_argument("--others", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.side:
        asyncio.run(side_main(arguments))
    elif arguments.quick:
        asyncio.run(main(Plan(runs=4, steps=2, rounds=1), arguments.profile))
    else:
        plan = Plan(runs=arguments.runs, steps=arguments.steps, rounds=arguments.rounds)
        asyncio.run(main(plan, arguments.profile))
    leave()
