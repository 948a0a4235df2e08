"""Waiting for a run a tool call started (``ctx.wait_for``), durably, as an activity of the waiting run."""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import activity

from chamvi._constants import ACTIVITY_WAIT_FOR_RUN
from chamvi.client import ChamviClient
from chamvi.models import RunView, RunWaitRequest

HEARTBEAT_SECONDS = 10.0


class RunActivities:
    """Activities that act on other runs from inside a run."""

    @activity.defn(name=ACTIVITY_WAIT_FOR_RUN)
    async def wait_for_run(self, request: RunWaitRequest) -> RunView:
        """The other run's outcome once it ended, without its steps (they stay in its own history).

        It heartbeats while it waits, so a killed worker's wait is taken up by another one soon.
        """
        client = ChamviClient(activity.client(), task_queue=activity.info().task_queue)
        waiting = asyncio.ensure_future(client.wait(request.run_id))
        try:
            while True:
                done, _ = await asyncio.wait([waiting], timeout=HEARTBEAT_SECONDS)
                if done:
                    return waiting.result().model_copy(update={"steps": []})
                activity.heartbeat()
        finally:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiting
