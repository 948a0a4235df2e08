"""Waiting for something to become true, without asserting any time.

The bound is generous on purpose: CI machines are shared, and a worker that replaces a stopped one
first waits out Temporal's sticky-queue timeout (5 s) before it gets the workflow's next task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from chamvi import ChamviClient, RunStatus, RunView

T = TypeVar("T")

PATIENCE_SECONDS = 60.0

SLOW_PATIENCE_SECONDS = 180.0
"""The patience for what a loaded machine slows most: a fresh process starting to serve (Python importing
chamvi, node loading an npm tool), a browser rendering, Temporal's background work (a deleted workflow
leaving the list). Each can take well over a minute on 2 cores at load 10. A test that waits this long
also needs ``SLOW_TEST_TIMEOUT``."""

SLOW_TEST_TIMEOUT = 360
"""pytest-timeout's bound (``@pytest.mark.timeout``) for a test that waits ``SLOW_PATIENCE_SECONDS``."""


async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, seconds: float = PATIENCE_SECONDS
) -> T:
    """Polls ``probe`` until it returns something other than None, and returns that."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        found = await probe()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} never happened")
        await asyncio.sleep(0.05)


async def until_status(chamvi: ChamviClient, run_id: str, status: RunStatus) -> RunView:
    async def probe() -> RunView | None:
        run = await chamvi.get_run(run_id)
        return run if run.status == status else None

    return await eventually(probe, f"run {run_id} reaching {status.value}")
