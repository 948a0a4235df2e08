"""The tool activity: ``chamvi._tool_runner`` on Temporal.

It reads what the call needs from the run through queries (the trigger envelope once per run and
worker, recorded effects as asked); a server that does not answer them fails the call, which Temporal
runs again (``chamvi._infrastructure``). It heartbeats so that a cancelled run stops its tool within
seconds and a killed worker's call is retried soon.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from temporalio import activity

from chamvi._constants import ACTIVITY_CALL_TOOL, QUERY_EFFECT, QUERY_TRIGGER, SIGNAL_EFFECT_RECORDED
from chamvi._heartbeat import heartbeating
from chamvi._infrastructure import bookkeeping
from chamvi._run_slots import RunSlots
from chamvi._tool_runner import ToolRunner
from chamvi.client import ChamviClient
from chamvi.models import (
    EffectQuery,
    EffectRecord,
    RecordedEffect,
    RunInput,
    ToolRequest,
    ToolResult,
    TriggerEnvelope,
)
from chamvi.worker_state import AppRuntime


class _TemporalRunAccess:
    """``RunAccess`` through the run's queries; payloads stay out of every tool call's input."""

    def __init__(self, run_id: str, triggers: OrderedDict[str, TriggerEnvelope], max_runs: int) -> None:
        self._run_id = run_id
        self._triggers = triggers
        self._max_runs = max_runs

    @bookkeeping("asking the run for its trigger")
    async def trigger(self) -> TriggerEnvelope:
        envelope = self._triggers.get(self._run_id)
        if envelope is None:
            handle = activity.client().get_workflow_handle(self._run_id)
            envelope = await handle.query(QUERY_TRIGGER, result_type=TriggerEnvelope)
            self._triggers[self._run_id] = envelope
            while len(self._triggers) > self._max_runs:
                self._triggers.popitem(last=False)
        self._triggers.move_to_end(self._run_id)
        return envelope

    @bookkeeping("asking the run for a recorded effect")
    async def recorded_effect(self, key: str) -> tuple[bool, Any]:
        handle = activity.client().get_workflow_handle(self._run_id)
        record = await handle.query(QUERY_EFFECT, EffectQuery(key=key), result_type=EffectRecord)
        return record.found, record.result

    @bookkeeping("recording an effect in the run")
    async def record_effect(self, key: str, result: Any) -> None:
        # a signal is in the run's history once the call returns: a query of a retried call sees it
        handle = activity.client().get_workflow_handle(self._run_id)
        await handle.signal(SIGNAL_EFFECT_RECORDED, RecordedEffect(key=key, result=result))

    @bookkeeping("starting a run (ctx.dispatch)")
    async def start(self, run_input: RunInput) -> str:
        client = ChamviClient(activity.client(), task_queue=activity.info().task_queue)
        return (await client.start(run_input)).run_id


class ToolActivities:
    """Holds the tool runner on this worker's runtime, and its cache of trigger envelopes."""

    def __init__(self, runtime: AppRuntime, max_runs: int = 256) -> None:
        self.runner = ToolRunner(runtime)
        self._triggers: OrderedDict[str, TriggerEnvelope] = OrderedDict()
        self._max_runs = max_runs
        self.slots: RunSlots = runtime.slots
        """The worker's run slots (its runtime's): a tool call takes its run's."""

    @activity.defn(name=ACTIVITY_CALL_TOOL)
    async def call_tool(self, request: ToolRequest) -> ToolResult:
        """One tool call of a run, in the run's slot of this worker (``chamvi._run_slots``)."""
        access = _TemporalRunAccess(request.run_id, self._triggers, self._max_runs)
        async with heartbeating() as cancellation:
            # the run's first call here asks the run for its trigger: a round trip through the
            # server, made before the slot is taken so that no other run's call waits on it
            await access.trigger()
            async with self.slots.slot(request.run_id):
                return await self.runner.run(request, access, cancellation)
