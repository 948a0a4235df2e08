"""The baseline the benchmarks compare against, and small helpers to read histories and print tables.

The baseline is the least a Temporal workflow can do per activity: a workflow that runs one trivial
activity after another. Kept apart from ``runs.py`` so the workflow sandbox imports it by a real
module name rather than ``__main__``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

BARE_WORKFLOW = "bench.BareChain"
BARE_ACTIVITY = "bench.noop"


@dataclass
class BareInput:
    activities: int


@dataclass
class BareResult:
    activities: int


@activity.defn(name=BARE_ACTIVITY)
async def noop(i: int) -> int:
    return i


@workflow.defn(name=BARE_WORKFLOW)
class BareChainWorkflow:
    @workflow.run
    async def run(self, bench_input: BareInput) -> BareResult:
        for i in range(bench_input.activities):
            await workflow.execute_activity(noop, i, start_to_close_timeout=timedelta(seconds=30))
        return BareResult(activities=bench_input.activities)


# ---- histories ----------------------------------------------------------------------------------


@dataclass
class ActivityTiming:
    """One activity and the workflow task that took its result, as the server saw them, in ms."""

    name: str
    scheduled: float
    started: float
    closed: float
    task_scheduled: float
    task_started: float
    task_completed: float


def _ms(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e6


def _next(events: Sequence[HistoryEvent], start: int, kind: EventType.ValueType) -> int:
    for index in range(start, len(events)):
        if events[index].event_type == kind:
            return index
    raise ValueError(f"no {EventType.Name(kind)} after event {start}")


def activity_timings(events: Sequence[HistoryEvent]) -> list[ActivityTiming]:
    """Every completed (non-local) activity with its times and those of the next workflow task, in order."""
    scheduled: dict[int, HistoryEvent] = {}
    started: dict[int, HistoryEvent] = {}
    timings: list[ActivityTiming] = []
    for index, event in enumerate(events):
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started[event.activity_task_started_event_attributes.scheduled_event_id] = event
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled_id = event.activity_task_completed_event_attributes.scheduled_event_id
            schedule = scheduled[scheduled_id]
            task = _next(events, index, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
            task_started = _next(events, task, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
            task_completed = _next(events, task_started, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
            timings.append(
                ActivityTiming(
                    name=schedule.activity_task_scheduled_event_attributes.activity_type.name,
                    scheduled=_ms(schedule),
                    started=_ms(started[scheduled_id]),
                    closed=_ms(event),
                    task_scheduled=_ms(events[task]),
                    task_started=_ms(events[task_started]),
                    task_completed=_ms(events[task_completed]),
                )
            )
    return timings


@dataclass
class Breakdown:
    """Medians over one kind of activity: where the time of one activity round trip goes."""

    count: int
    activity_wait: float
    """Scheduled to started: the activity task waiting for a worker."""
    activity_run: float
    """Started to closed: the worker decodes the input, runs the activity, encodes and reports the result."""
    task_wait: float
    """The next workflow task, scheduled to started: waiting for a worker."""
    task_run: float
    """The next workflow task, started to completed: the worker runs the workflow code on the result."""

    @property
    def worker(self) -> float:
        return self.activity_run + self.task_run

    @property
    def total(self) -> float:
        return self.activity_wait + self.activity_run + self.task_wait + self.task_run


def breakdown(timings: Sequence[ActivityTiming], name: str) -> Breakdown:
    rows = [t for t in timings if t.name == name]
    if not rows:
        return Breakdown(0, 0.0, 0.0, 0.0, 0.0)
    return Breakdown(
        count=len(rows),
        activity_wait=statistics.median(t.started - t.scheduled for t in rows),
        activity_run=statistics.median(t.closed - t.started for t in rows),
        task_wait=statistics.median(t.task_started - t.task_scheduled for t in rows),
        task_run=statistics.median(t.task_completed - t.task_started for t in rows),
    )


# ---- output -------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        return "  " + "  ".join(parts).rstrip()

    rule = "  " + "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator else "n/a"


def temporal_cli_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except OSError as error:
        return f"unknown ({error})"
    return out.stdout.strip() or "unknown"


def leave() -> None:
    """Exits without finalizing: the SDK's Tokio threads can outlive the interpreter and abort its
    finalization now and then (temporalio/sdk-python#300); everything is printed and shut down."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
