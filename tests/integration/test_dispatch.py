"""Dispatch: idempotency keys (scoped to the invoker) and concurrency keys across runs."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from chamvi import App, ChamviClient, Invoker, RunStatus, define_agent, tool
from chamvi.errors import InvalidInputError
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.polling import until_status


@tool
async def pause(seconds: float) -> str:
    """Sleeps a little, so overlapping runs would show."""
    await asyncio.sleep(seconds)
    return "paused"


@tool
async def fail_hard() -> str:
    """Fails the run."""
    from chamvi import FatalToolError

    raise FatalToolError("stop here")


def make_app(turns: list) -> App:
    models = ModelRegistry()
    models.register("scripted/keys", ScriptedModel(turns))
    return App(
        agents=[
            define_agent(name="keys", model="scripted/keys", instructions="Test.", tools=[pause, fail_hard])
        ],
        models=models,
    )


async def test_redelivered_dispatch_returns_the_existing_run(chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(make_app([reply("once")])):
        first = await chamvi.dispatch("keys", {"n": 1}, idempotency_key="delivery-1")
        again = await chamvi.dispatch("keys", {"n": 1}, idempotency_key="delivery-1")
        await chamvi.wait(first.run_id)
        after_completion = await chamvi.dispatch("keys", {"n": 1}, idempotency_key="delivery-1")
    assert first.created and not again.created and not after_completion.created
    assert first.run_id == again.run_id == after_completion.run_id


async def test_idempotency_key_is_scoped_to_the_invoker(chamvi: ChamviClient, running_worker) -> None:
    ada = Invoker(id="u-1", kind="user", permissions=[])
    bob = Invoker(id="u-2", kind="user", permissions=[])
    async with running_worker(make_app([reply("x")])):
        a1 = await chamvi.dispatch("keys", idempotency_key="k", invoker=ada)
        a2 = await chamvi.dispatch("keys", idempotency_key="k", invoker=ada)
        b1 = await chamvi.dispatch("keys", idempotency_key="k", invoker=bob)
        for run_id in {a1.run_id, b1.run_id}:
            await chamvi.wait(run_id)
    assert a1.run_id == a2.run_id and not a2.created
    assert b1.run_id != a1.run_id and b1.created


async def test_runs_sharing_a_concurrency_key_never_overlap_and_keep_arrival_order(
    chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(make_app([call("pause", seconds=0.3), reply("done")])):
        run_ids = [
            (await chamvi.dispatch("keys", {"i": i}, concurrency_key="issue-9")).run_id for i in range(4)
        ]
        runs = [await chamvi.wait(run_id) for run_id in run_ids]
    assert all(r.status == RunStatus.COMPLETED for r in runs)
    spans = [(r.started_at, r.ended_at) for r in runs]
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert ended is not None and started is not None and started >= ended
    assert [r.payload for r in (run.trigger for run in runs)] == [{"i": i} for i in range(4)]


async def test_the_key_is_released_when_a_run_fails_or_is_cancelled(
    chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(make_app([call("fail_hard")])):
        failing = await chamvi.dispatch("keys", concurrency_key="shared")
        failed = await chamvi.wait(failing.run_id)
    assert failed.status == RunStatus.FAILED
    async with running_worker(make_app([call("pause", seconds=30), reply("x")])):
        holder = await chamvi.dispatch("keys", concurrency_key="shared")
        queued = await chamvi.dispatch("keys", concurrency_key="shared")
        await until_status(chamvi, holder.run_id, RunStatus.RUNNING)
        assert (await chamvi.get_run(queued.run_id)).status == RunStatus.QUEUED
        await chamvi.cancel(queued.run_id)  # cancelled while queued: leaves the queue
        await chamvi.cancel(holder.run_id)  # cancelled while holding: releases
        assert (await chamvi.wait(holder.run_id)).status == RunStatus.CANCELLED
        assert (await chamvi.wait(queued.run_id)).status == RunStatus.CANCELLED
    async with running_worker(make_app([reply("free")])):
        later = await chamvi.dispatch("keys", concurrency_key="shared")
        assert (await chamvi.wait(later.run_id)).status == RunStatus.COMPLETED


@pytest.mark.parametrize(
    ("field", "value"),
    [("agent", "Bad Name"), ("idempotency_key", ""), ("concurrency_key", "x" * 256), ("address", "a\0b")],
)
async def test_invalid_dispatch_fields_are_refused_naming_them(
    chamvi: ChamviClient, field: str, value: str
) -> None:
    arguments = {"agent": "keys", field: value}
    with pytest.raises(InvalidInputError, match=field.split("_")[0]):
        await chamvi.dispatch(**arguments)  # type: ignore[arg-type]


async def test_a_tool_policy_offers_tools_by_the_invokers_permissions(
    chamvi: ChamviClient, running_worker
) -> None:
    from chamvi import require_tool_permission

    model = ScriptedModel([call("pause", seconds=0), reply("done")])
    models = ModelRegistry()
    models.register("scripted/ops", model)
    agent = define_agent(
        name="ops",
        model="scripted/ops",
        instructions="Operate.",
        tools=[pause, fail_hard],
        tool_policy=require_tool_permission(),
    )
    releaser = Invoker(id="u-42", kind="user", permissions=["tool:ops:pause"])
    async with running_worker(App(agents=[agent], models=models)):
        allowed = await chamvi.wait((await chamvi.dispatch("ops", invoker=releaser)).run_id)
        refused = await chamvi.wait((await chamvi.dispatch("ops")).run_id)
    assert [t.name for t in model.requests[0].tools] == ["pause"]
    assert "u-42" not in (
        model.requests[0].messages[1].content or ""
    )  # the invoker is not shown to the model
    assert next(s for s in allowed.steps if s.kind == "tool").output == "paused"
    assert model.requests[2].tools == []
    assert next(s for s in refused.steps if s.kind == "tool").error.code == "tool_not_allowed"  # type: ignore[union-attr]


async def test_the_key_is_released_when_a_run_times_out(chamvi: ChamviClient, running_worker) -> None:
    from datetime import timedelta

    from chamvi import Budget

    models = ModelRegistry()
    models.register("scripted/slow", ScriptedModel([call("pause", seconds=30), reply("late")]))
    models.register("scripted/next", ScriptedModel([reply("next")]))
    app = App(
        agents=[
            define_agent(
                name="slow",
                model="scripted/slow",
                instructions="x",
                tools=[pause],
                budget=Budget(timeout=timedelta(seconds=1)),
            ),
            define_agent(name="next", model="scripted/next", instructions="x"),
        ],
        models=models,
    )
    async with running_worker(app):
        slow = await chamvi.dispatch("slow", concurrency_key="deploys")
        following = await chamvi.dispatch("next", concurrency_key="deploys")
        timed_out = await chamvi.wait(slow.run_id)
        after = await chamvi.wait(following.run_id)
    assert timed_out.error is not None and timed_out.error.code == "timeout"
    assert after.status == RunStatus.COMPLETED


async def test_an_unknown_agent_logs_one_line_in_the_worker_not_a_traceback(
    chamvi: ChamviClient, running_worker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running_worker(make_app([])):
        run = await chamvi.wait((await chamvi.dispatch("nosuch")).run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.message == "unknown agent 'nosuch': this app serves 'keys'"
    lines = [r.getMessage() for r in caplog.records if "unknown agent 'nosuch'" in r.getMessage()]
    assert lines == [f"AgentRun {run.run_id}: unknown agent 'nosuch': this app serves 'keys'"]
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
