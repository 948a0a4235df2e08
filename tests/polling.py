"""Waiting for a run to reach a state, without asserting any time."""

from __future__ import annotations

import asyncio

from chamvi import ChamviClient, RunStatus, RunView


async def until_status(chamvi: ChamviClient, run_id: str, status: RunStatus, attempts: int = 400) -> RunView:
    for _ in range(attempts):
        run = await chamvi.get_run(run_id)
        if run.status == status:
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {status.value}")
