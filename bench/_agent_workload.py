"""What both sides of ``agent_peers.py`` share: the agent's words, the tool's answer, and how one burst
of concurrent runs is timed and its histories weighed.

Apart from ``agent_peers.py`` so that the peer's workflow module (``_agents_peer.py``, which the
workflow sandbox imports by its name) and the chamvi side use the same definitions.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from _common import activity_timings, breakdown
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

INSTRUCTIONS = "You read pages and summarise them."
PROMPT = "Read the pages."
MODEL = "bench-model"
"""The model id both sides send; the loopback server answers any."""
API_KEY = "bench"
"""Sent by both OpenAI clients; the loopback server reads no key."""


def page_text(page: int) -> str:
    """The short string ``fetch_page`` returns on both sides."""
    return f"page {page}: durable agents keep each step in the workflow history."


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of another process so far (``/proc/<pid>/stat``), 0 if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Burst:
    """One side's burst of concurrent runs, as its process measured it."""

    runs: int
    steps: int
    wall: float
    """Seconds from the first start to the last result."""
    cpu: float
    """CPU seconds of this process (its client and its worker, every thread) over the burst."""
    server_cpu: float
    """CPU seconds of the Temporal dev server over the burst (other processes' work included)."""
    model_cpu: float
    """CPU seconds of the loopback model server over the burst."""
    history_bytes: int
    """The median run's history, summed over its events' encoded sizes."""
    events: int
    """The median run's events."""
    tasks: int
    """The median run's workflow tasks (completed)."""
    parts: dict[str, tuple[float, float, float, float]]
    """Per activity type over every run: the medians of ``_common.Breakdown`` in ms (activity wait,
    activity run, next workflow task's wait, its run)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _py_spy(path: str) -> subprocess.Popen[bytes]:
    """py-spy sampling this process (the thread holding the GIL only: where its Python CPU goes), from a
    moment after it attached."""
    command = [
        str(Path(sys.executable).with_name("py-spy")),
        "record",
        "--pid",
        str(os.getpid()),
        "--format",
        "raw",
        "--rate",
        "200",
        "--gil",
    ]
    spy = subprocess.Popen([*command, "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    return spy


async def history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    return list((await client.get_workflow_handle(workflow_id).fetch_history()).events)


def _parts(histories: Sequence[list[HistoryEvent]]) -> dict[str, tuple[float, float, float, float]]:
    timings = [timing for events in histories for timing in activity_timings(events)]
    parts = {}
    for name in sorted({timing.name for timing in timings}):
        part = breakdown(timings, name)
        parts[name] = (part.activity_wait, part.activity_run, part.task_wait, part.task_run)
    return parts


async def burst(
    client: Client,
    start: Callable[[], Awaitable[str]],
    finish: Callable[[str], Awaitable[None]],
    *,
    runs: int,
    steps: int,
    others: Sequence[int],
    profile: str | None = None,
) -> Burst:
    """Starts ``runs`` runs at once with ``start`` (which returns a workflow id), waits for each with
    ``finish``, and measures wall, this process's CPU and the CPU of ``others`` (server, model) pids.
    With ``profile``, py-spy samples this process over the burst into that file (collapsed stacks)."""
    spy = _py_spy(profile) if profile else None
    before = [cpu_seconds(pid) for pid in others]
    cpu, wall = time.process_time(), time.perf_counter()
    ids = await asyncio.gather(*(start() for _ in range(runs)))
    await asyncio.gather(*(finish(workflow_id) for workflow_id in ids))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server, model = (cpu_seconds(pid) - b for pid, b in zip(others, before, strict=True))
    if spy:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    histories = [await history(client, workflow_id) for workflow_id in ids]
    done = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    return Burst(
        runs,
        steps,
        wall,
        cpu,
        server,
        model,
        history_bytes=int(statistics.median(sum(e.ByteSize() for e in events) for events in histories)),
        events=int(statistics.median(len(events) for events in histories)),
        tasks=int(statistics.median(sum(e.event_type == done for e in events) for events in histories)),
        parts=_parts(histories),
    )
