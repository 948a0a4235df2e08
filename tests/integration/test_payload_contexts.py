"""With the runtime tunings, a worker's sandbox skips the payload contexts only when no codec or external
storage could read them; without them, it is temporalio's own."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from chamvi import App, ChamviClient, RunStatus, define_agent, tool
from chamvi._constants import ACTIVITY_CALL_MODEL, ACTIVITY_CALL_TOOL
from chamvi._sandbox_runner import ContextFreeSandboxedRunner
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def adder_app() -> App:
    models = ModelRegistry()
    models.register("scripted/adder", ScriptedModel([call("add", a=2, b=3), reply("5")]))
    return App(
        agents=[define_agent(name="adder", model="scripted/adder", instructions="Add.", tools=[add])],
        models=models,
    )


class Seeing(PayloadCodec, WithSerializationContext):
    """Reverses payload bytes, and notes the activities whose payloads it was given a context for."""

    def __init__(self, seen: set[str], context: SerializationContext | None = None) -> None:
        self.seen = seen
        self.context = context

    def with_context(self, context: SerializationContext) -> Seeing:
        return Seeing(self.seen, context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if isinstance(self.context, ActivitySerializationContext) and self.context.activity_type:
            self.seen.add(self.context.activity_type)
        return [Payload(metadata=p.metadata, data=p.data[::-1]) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload(metadata=p.metadata, data=p.data[::-1]) for p in payloads]


@pytest.mark.parametrize(
    ("tunings", "runner"), [(True, ContextFreeSandboxedRunner), (False, SandboxedWorkflowRunner)]
)
async def test_without_a_codec_the_tuned_sandbox_answers_no_contexts_and_runs_complete(
    chamvi: ChamviClient, client: Client, task_queue: str, tunings: bool, runner: type
) -> None:
    worker = build_worker(client, adder_app(), task_queue=task_queue, runtime_tunings=tunings)
    assert type(worker.config(active_config=True)["workflow_runner"]) is runner
    async with worker:
        run = await chamvi.wait((await chamvi.dispatch("adder", {"q": "2+3"})).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"


async def test_a_codec_gets_each_activitys_context_from_the_sandbox(client: Client) -> None:
    seen: set[str] = set()
    converter = dataclasses.replace(client.data_converter, payload_codec=Seeing(seen))
    coded = Client(client.service_client, namespace=client.namespace, data_converter=converter)
    chamvi = ChamviClient(coded, task_queue=f"test-{uuid.uuid4().hex[:12]}")
    worker = build_worker(coded, adder_app(), task_queue=chamvi.task_queue, runtime_tunings=True)
    assert type(worker.config(active_config=True)["workflow_runner"]) is SandboxedWorkflowRunner
    async with worker:
        run = await chamvi.wait((await chamvi.dispatch("adder", {"q": "2+3"})).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    assert {ACTIVITY_CALL_MODEL, ACTIVITY_CALL_TOOL} <= seen

