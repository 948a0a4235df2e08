"""Heartbeats of a long activity: a killed worker is noticed quickly and a cancelled run's call stops.

Temporal delivers an activity's cancellation only in the answer to a heartbeat, so a model call that
streams (or waits on a stalled stream) and a tool call both heartbeat on a timer while they run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar

from temporalio import activity

HEARTBEAT_SECONDS = 2.0

_DOING: ContextVar[list[str]] = ContextVar("chamvi_heartbeat_doing")
"""What the activity does now, shared by its body and its heartbeat task (one list per activity)."""


@contextlib.contextmanager
def doing(what: str) -> Iterator[None]:
    """Heartbeats carry ``what`` while the body runs (``chamvi runs show`` shows it), e.g. a server's name.

    Outside ``heartbeating()`` it does nothing.
    """
    holder = _DOING.get(None)
    if holder is None:
        yield
        return
    holder.append(what)
    try:
        yield
    finally:
        holder.remove(what)


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[asyncio.Event]:
    """Heartbeats while the body runs; the event it yields is set when Temporal cancels the activity."""
    cancellation = asyncio.Event()
    reset = _DOING.set([])  # before the task: it copies this context, and the list is shared
    heartbeat = asyncio.create_task(_heartbeat(cancellation))
    try:
        yield cancellation
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
        _DOING.reset(reset)


async def _heartbeat(cancellation: asyncio.Event) -> None:
    """Keeps a long call alive and lets the server notice a killed worker quickly."""
    timeout = activity.info().heartbeat_timeout
    # often enough that a cancelled or timed-out run stops its call within seconds
    interval = min(timeout.total_seconds() / 3, HEARTBEAT_SECONDS) if timeout else HEARTBEAT_SECONDS
    waiter = asyncio.ensure_future(activity.wait_for_cancelled())
    try:
        while not waiter.done():
            # the first heartbeat only after an interval: a quick call sends none
            await asyncio.wait([waiter], timeout=interval)
            if not waiter.done():
                holder = _DOING.get([])
                activity.heartbeat(*holder[-1:])
        cancellation.set()
    finally:
        waiter.cancel()
