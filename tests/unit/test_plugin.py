"""ChamviPlugin's configuration: what it adds to a client, and what of the user's choices it keeps."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from chamvi import App, ChamviPlugin
from chamvi._lifecycle import memory_index
from chamvi._sandbox_runner import ContextFreeSandboxedRunner, without_payload_contexts
from chamvi.errors import ChamviValidationError
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.plugin import RUN_MODULES_PASSTHROUGH, SANDBOX_PASSTHROUGH
from chamvi.settings import Settings
from chamvi.vectors.edge import EdgeStore


class Reversing(PayloadCodec):
    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload(metadata=p.metadata, data=p.data[::-1]) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.encode(payloads)


def plugin() -> ChamviPlugin:
    return ChamviPlugin(App(agents=[]), index=memory_index())


def test_a_client_gets_pydantic_payloads_and_keeps_the_users_codec() -> None:
    plain = plugin().configure_client({})  # type: ignore[typeddict-item]
    assert plain["data_converter"].payload_converter_class is PydanticPayloadConverter
    mine = dataclasses.replace(DataConverter.default, payload_codec=Reversing())
    kept = plugin().configure_client({"data_converter": mine})  # type: ignore[typeddict-item]
    assert kept["data_converter"].payload_converter_class is PydanticPayloadConverter
    assert isinstance(kept["data_converter"].payload_codec, Reversing)


def test_the_sandbox_passes_the_shared_kernel_through_and_an_unsandboxed_runner_stays() -> None:
    configure = ChamviPlugin(App(agents=[]), index=memory_index(), runtime_tunings=True).workflow_runner
    assert callable(configure)
    runner = configure(None)
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert set(SANDBOX_PASSTHROUGH) <= set(runner.restrictions.passthrough_modules)
    # AgentRun's own modules by exact name: the other workflow modules are still imported per run
    assert set(RUN_MODULES_PASSTHROUGH) <= set(runner.restrictions.passthrough_modules)
    assert "chamvi.workflows" not in runner.restrictions.passthrough_modules
    assert "chamvi" not in runner.restrictions.passthrough_modules
    unsandboxed = UnsandboxedWorkflowRunner()
    assert configure(unsandboxed) is unsandboxed


@pytest.mark.parametrize("tunings", [False, True])
def test_a_replayer_gets_the_sandbox_a_worker_of_the_plugin_runs(tunings: bool) -> None:
    # the replay tests' "tunings on" replays through the tuned sandbox, not temporalio's own
    chamvi = ChamviPlugin(App(agents=[]), index=memory_index(), runtime_tunings=tunings)
    runner = Replayer(workflows=[], plugins=[chamvi]).config(active_config=True)["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert set(SANDBOX_PASSTHROUGH) <= set(runner.restrictions.passthrough_modules)
    assert (type(runner) is ContextFreeSandboxedRunner) is tunings
    assert set(RUN_MODULES_PASSTHROUGH).isdisjoint(runner.restrictions.passthrough_modules) is not tunings


FIRST_WORKERS = """
import asyncio, gc
from chamvi import App, ChamviPlugin
from chamvi._lifecycle import memory_index

class Worker:  # what run_worker reads of a worker with nothing started in the background
    def config(self, active_config):
        return {"task_queue": "q"}

async def next(worker):
    pass

async def main():
    for tunings in ({}, {"runtime_tunings": True}):
        plugin = ChamviPlugin(App(agents=[]), index=memory_index(), start_collections=False,
                              start_schedules=False, start_channels=False, **tunings)
        await plugin.run_worker(Worker(), next)
        print(gc.get_freeze_count() > 0)

asyncio.run(main())
"""


@pytest.mark.timeout(300)
def test_a_worker_freezes_the_heap_only_when_the_application_asks() -> None:
    # a process of its own (a frozen heap stays frozen, and this one's is the test runner's): its
    # first worker leaves the heap alone, the second, with the runtime tunings, freezes it
    done = subprocess.run([sys.executable, "-c", FIRST_WORKERS], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_the_cap_on_runs_at_once_comes_from_the_plugin_then_chamvi_max_runs_then_four() -> None:
    app = App(agents=[])
    assert ChamviPlugin(app, index=memory_index()).slots.limit == 4
    from_env = Settings.from_env({"CHAMVI_MAX_RUNS": "8"})
    assert ChamviPlugin(app, index=memory_index(), settings=from_env).slots.limit == 8
    assert ChamviPlugin(app, index=memory_index(), settings=from_env, max_runs=2).slots.limit == 2
    with pytest.raises(ChamviValidationError, match=r"CHAMVI_MAX_RUNS='none' is not a positive number"):
        Settings.from_env({"CHAMVI_MAX_RUNS": "none"})


def test_only_temporalios_sandbox_without_a_codec_skips_the_payload_contexts() -> None:
    configure = ChamviPlugin(App(agents=[]), index=memory_index(), runtime_tunings=True).workflow_runner
    assert callable(configure)
    sandboxed = configure(None)
    assert isinstance(sandboxed, SandboxedWorkflowRunner)
    plain = plugin().configure_client({})["data_converter"]  # type: ignore[typeddict-item]
    skipping = without_payload_contexts(sandboxed, plain)
    assert isinstance(skipping, ContextFreeSandboxedRunner)
    assert skipping.restrictions is sandboxed.restrictions
    coded = dataclasses.replace(plain, payload_codec=Reversing())
    assert without_payload_contexts(sandboxed, coded) is sandboxed
    unsandboxed = UnsandboxedWorkflowRunner()
    assert without_payload_contexts(unsandboxed, plain) is unsandboxed


async def test_a_workers_boot_opens_every_collection_of_the_embedded_store_before_it_polls(
    tmp_path: Path,
) -> None:
    # opening an Edge shard holds the GIL while it reads: done in prepare(), which run_worker awaits
    # before it lets the worker poll, no run's activity stalls behind a first use
    store = EdgeStore(tmp_path / "edge")
    for name in ("a", "b"):
        await store.create(name, 4, "cosine")
    await store.close()
    reopened = EdgeStore(tmp_path / "edge")
    assert reopened._shards == {}
    plugin = ChamviPlugin(App(agents=[]), index=KnowledgeIndex(reopened))
    await plugin.prepare()
    assert sorted(reopened._shards) == ["a", "b"]
    await reopened.close()
