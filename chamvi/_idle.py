"""``ChamviClient.idle()``: waiting until no run of an agent (or none at all) is in progress.

In progress means queued or running (``ChamviStatus``); a run waiting for a person has freed its
slot, as in the seed, and does not count. Temporal's visibility (the list of workflows) is eventually
consistent: a run started a moment ago may be missing from it, and one that just ended may still be
listed as running. So the runs this client dispatched are tracked and read one by one with
``describe`` (which reads the run's own state, never behind), every listed run is read the same way
before it counts, and only the runs other processes started rely on the list alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, MutableMapping
from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi.errors import IdleTimeoutError
from chamvi.models import RunStatus

IDLE_POLL = timedelta(milliseconds=200)
"""How often ``idle`` looks again while runs are in progress (visibility is read each time)."""
BUSY = (RunStatus.QUEUED.value, RunStatus.RUNNING.value)


def busy_query(task_queue: str, agent: str | None) -> str:
    """The visibility query of the runs in progress on ``task_queue`` (of ``agent``)."""
    statuses = ", ".join(f'"{s}"' for s in BUSY)
    clauses = [
        f'WorkflowType = "{c.AGENT_RUN_WORKFLOW}"',
        'ExecutionStatus = "Running"',
        f'TaskQueue = "{_quote(task_queue)}"',
        f"{c.SA_STATUS.name} IN ({statuses})",
    ]
    if agent is not None:
        clauses.append(f'{c.SA_AGENT.name} = "{_quote(agent)}"')
    return " AND ".join(clauses)


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


async def _status(client: Client, run_id: str) -> str | None:
    """The run's status as its own state says (not the list's), or None once it ended or is gone."""
    try:
        described = await client.get_workflow_handle(run_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    return described.typed_search_attributes.get(c.SA_STATUS) or RunStatus.QUEUED.value


async def in_progress(
    client: Client, task_queue: str, tracked: MutableMapping[str, str], agent: str | None
) -> dict[str, str]:
    """The runs in progress now, by id, with their status; ended tracked runs are forgotten."""
    candidates: set[str] = {run_id for run_id, of in tracked.items() if agent is None or of == agent}
    async for execution in client.list_workflows(busy_query(task_queue, agent)):
        candidates.add(execution.id)
    busy: dict[str, str] = {}
    for run_id in sorted(candidates):
        status = await _status(client, run_id)
        if status is None:
            tracked.pop(run_id, None)
        elif status in BUSY:
            busy[run_id] = status
    return busy


async def wait_idle(
    client: Client,
    task_queue: str,
    tracked: MutableMapping[str, str],
    agent: str | None = None,
    timeout: timedelta | None = None,
    poll: timedelta = IDLE_POLL,
) -> None:
    """Returns once no run on ``task_queue`` (of ``agent``) is queued or running (module docstring).

    Raises:
        IdleTimeoutError: ``timeout`` ran out first; the message names the runs still in progress.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout.total_seconds()
    while True:
        busy = await in_progress(client, task_queue, tracked, agent)
        if not busy:
            return
        if timeout is not None and deadline is not None and loop.time() >= deadline:
            of = f" of agent {agent!r}" if agent is not None else ""
            raise IdleTimeoutError(
                f"runs{of} still in progress after {timeout.total_seconds():g} s: "
                f"{_listed(busy.items())}: wait longer (timeout=), or see them with "
                "`chamvi runs list --status running`"
            )
        await asyncio.sleep(poll.total_seconds())


def _listed(runs: Iterable[tuple[str, str]], most: int = 5) -> str:
    items = list(runs)
    shown = ", ".join(f"{run_id!r} ({status})" for run_id, status in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")
