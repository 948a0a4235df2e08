"""What a skill costs: the catalog block's size, and ``skill_load`` next to a plain tool of the same bytes.

16 skills of ~64 KiB each (the seed's "small: 16 skills, ~1 MiB"), every description near 300
characters, and once more with every description at the format's 1 024-character limit. Prints:

1. the catalog block of 16 skills: bytes, characters, and about how many tokens (characters / 4);
2. one tool call through ``ToolRunner`` (the tool activity's body: policy, input, hooks, the call,
   the result's checks), in this process, alternating: ``skill_load`` of the run's current catalog,
   ``skill_load`` of a pinned older version read back from the artifact store (a folder), and a plain
   ``@tool`` returning the very same result; median microseconds and the ratios (target <= 1.20x);
3. the same through Temporal: an agent run of N steps, each a model call and one of the tools, on a
   dev server of its own; median milliseconds per step and the ratio.

Runs stay at a few steps: each step's 64 KiB result is in the run's view (the ``run`` query), which
Temporal warns about past 512 KiB.

Usage: ``python bench/skills.py`` (2 000 calls per tool, runs of 6 steps, 8 each),
``python bench/skills.py --quick`` (200 calls, runs of 3 steps, 2 each).
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import leave, ratio, table
from _server import dev_server, machine, options, temporal_path
from temporalio.client import Client

from chamvi import App, ChamviClient, define_agent, tool
from chamvi._constants import TOOL_SKILL_LOAD
from chamvi._tool_runner import ToolRunner
from chamvi.artifacts import ArtifactStore
from chamvi.models import ToolCall, ToolRequest, TriggerEnvelope
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.skills import skill, skill_catalog
from chamvi.skills.sources import InlineSkill
from chamvi.worker_state import AppRuntime

SKILLS = 16
SKILL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Plan:
    calls: int
    steps: int
    runs: int


FULL = Plan(calls=2000, steps=6, runs=8)
QUICK = Plan(calls=200, steps=3, runs=2)


def skills(description_chars: int, marker: str = "") -> list[InlineSkill]:
    """16 skills of ~64 KiB: instructions in numbered steps, descriptions of the given length."""
    made = []
    for n in range(SKILLS):
        head = f"How to handle case {n} of the desk{marker}: when it applies, what to check, what to say. "
        description = (head * (description_chars // len(head) + 1))[:description_chars]
        line = f"{n}. Check the order, the customer's history and the policy before acting on case {n}.\n"
        instructions = f"# Procedure {n}\n\n" + line * (SKILL_BYTES // len(line))
        made.append(skill(name=f"procedure-{n:02d}", description=description, instructions=instructions))
    return made


class Run:
    """A run as a tool call sees it: no trigger payload, no effects recorded."""

    async def trigger(self) -> TriggerEnvelope:
        return TriggerEnvelope()

    async def recorded_effect(self, key: str) -> tuple[bool, Any]:
        return False, None

    async def record_effect(self, key: str, result: Any) -> None:
        return None

    async def start(self, run_input: Any) -> str:
        raise NotImplementedError


def block_sizes() -> None:
    rows = []
    for label, chars in (("~300-character descriptions", 300), ("1 024-character descriptions", 1024)):
        block = skill_catalog(*skills(chars)).instructions
        rows.append([label, f"{len(block.encode()):,}", f"{len(block):,}", f"~{len(block) // 4:,}"])
    print(f"\n1. the catalog block of {SKILLS} skills (a system message of every model call)\n")
    print(table(["skills", "bytes", "characters", "tokens"], rows))


async def tool_calls(plan: Plan) -> None:
    folder = Path(tempfile.mkdtemp(prefix="chamvi-bench-skills-"))
    store = ArtifactStore.local(folder)
    old = AppRuntime(
        App(
            agents=[define_agent(name="clerk", model="local/demo", instructions="x")],
            skills=skills(300, " (old)"),
        ),
        artifacts=store,
    )
    pinned = await old.skills.current(old.app.agent("clerk"))
    assert pinned is not None
    result = await (await old.skills.pinned(pinned.version)).load("procedure-07")  # type: ignore[union-attr]

    @tool
    async def plain_load(name: str) -> dict[str, Any]:
        """Returns the same bytes as skill_load, from a dict."""
        return result

    agent = define_agent(name="clerk", model="local/demo", instructions="x", tools=[plain_load])
    runtime = AppRuntime(App(agents=[agent], skills=skills(300)), artifacts=store)
    current = await runtime.skills.current(runtime.app.agent("clerk"))
    assert current is not None
    runner = ToolRunner(runtime)
    cases = {
        "skill_load (current)": (TOOL_SKILL_LOAD, current.version),
        "skill_load (pinned, store)": (TOOL_SKILL_LOAD, pinned.version),
        "plain tool, same bytes": ("plain_load", current.version),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(plan.calls + 50):
        for name, (tool_name, skills_version) in cases.items():
            request = ToolRequest(
                run_id="run-bench",
                agent="clerk",
                step=0,
                call=ToolCall(id=f"c{i}", name=tool_name, arguments={"name": "procedure-07"}),
                trigger=TriggerEnvelope(),
                skills_version=skills_version,
            )
            began = time.perf_counter()
            answer = await runner.run(request, Run(), asyncio.Event())
            if i >= 50:  # warm-up
                samples[name].append(time.perf_counter() - began)
            assert answer.status == "ok", answer.error
    plain = statistics.median(samples["plain tool, same bytes"])
    size = len(str(result["instructions"]).encode())
    print(f"\n2. one tool call through ToolRunner, {plan.calls} each, alternating ({size:,} bytes of text)\n")
    print(
        table(
            ["tool", "median us", "vs plain"],
            [
                [name, f"{1e6 * statistics.median(s):.0f}", ratio(statistics.median(s), plain)]
                for name, s in samples.items()
            ],
        )
    )


async def runs(plan: Plan, client: Client) -> None:
    @tool
    async def plain_load(name: str) -> dict[str, Any]:
        """Returns the same bytes as skill_load, from a dict."""
        return expected

    catalog = skill_catalog(*skills(300))
    expected = await catalog.load("procedure-07")
    models = ModelRegistry()
    for tool_name in (TOOL_SKILL_LOAD, "plain_load"):
        turns = [call(tool_name, name="procedure-07") for _ in range(plan.steps)]
        models.register(f"scripted/{tool_name}", ScriptedModel([*turns, reply("done")]))
    agents = [
        define_agent(
            name="skilled", model=f"scripted/{TOOL_SKILL_LOAD}", instructions="x", skills=skills(300)
        ),
        define_agent(name="plain", model="scripted/plain_load", instructions="x", tools=[plain_load]),
    ]
    chamvi = ChamviClient(client, task_queue="bench-skills")
    per_step: dict[str, list[float]] = {"skilled": [], "plain": []}
    async with build_worker(client, App(agents=agents, models=models), task_queue="bench-skills"):
        for i in range(plan.runs + 1):
            for agent in per_step:
                began = time.perf_counter()
                run = await chamvi.wait((await chamvi.dispatch(agent)).run_id)
                assert run.status.value == "completed", run.error
                if i:  # the first of each is a warm-up
                    per_step[agent].append((time.perf_counter() - began) / plan.steps)
    skilled, plain = (statistics.median(per_step[a]) for a in ("skilled", "plain"))
    print(f"\n3. agent runs of {plan.steps} steps through Temporal, {plan.runs} each, alternating\n")
    print(
        table(
            ["each step calls", "median ms per step", "vs plain"],
            [
                ["skill_load", f"{1000 * skilled:.1f}", ratio(skilled, plain)],
                ["plain tool, same bytes", f"{1000 * plain:.1f}", "1.00x"],
            ],
        )
    )


async def main(plan: Plan, quick: bool) -> None:
    path = temporal_path()
    print(
        f"chamvi bench/skills.py{' --quick' if quick else ''}: Python {platform.python_version()}, "
        f"temporalio {version('temporalio')}\n{machine()}; worker and client in this process"
    )
    started = time.perf_counter()
    block_sizes()
    await tool_calls(plan)
    async with dev_server(path) as client:
        await runs(plan, client)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    args = options(__doc__, "200 calls per tool, runs of 3 steps").parse_args()
    asyncio.run(main(QUICK if args.quick else FULL, args.quick))
    leave()
