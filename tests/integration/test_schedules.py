"""Agent schedules on a real dev server: fires start ordinary runs, once per fire, and the worker
lifecycle keeps the schedules the code declares."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy, WorkflowExecutionStatus

from chamvi import App, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi._constants import (
    AGENT_RUN_WORKFLOW,
    SCHEDULE_ID_PREFIX,
    SCHEDULE_TRIGGER,
    SCHEDULED_RUN_ID_PREFIX,
)
from chamvi._lifecycle import memory_index
from chamvi.errors import ConflictError, ScheduleNotFoundError
from chamvi.models import ScheduledRunResult
from chamvi.plugin import ChamviPlugin
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from tests.polling import eventually
from tests.support.names import unique


def digest_app(agent: str) -> App:
    models = ModelRegistry()
    models.register("scripted/digest", ScriptedModel([reply("today: nothing new")], repeat_last=True))
    return App(
        agents=[define_agent(name=agent, model="scripted/digest", instructions="Digest.")], models=models
    )


async def _delete_quietly(chamvi: ChamviClient, schedule_id: str) -> None:
    with contextlib.suppress(ScheduleNotFoundError):
        await chamvi.schedules.delete(schedule_id)


async def test_a_schedule_fires_on_the_dev_server_and_starts_an_ordinary_run(
    chamvi: ChamviClient, running_worker
) -> None:
    agent, schedule_id = unique("digest"), unique("every-second")
    async with running_worker(digest_app(agent)):
        await chamvi.schedules.create(agent, every="1s", id=schedule_id, payload={"topic": "news"})
        try:

            async def a_run() -> str | None:
                runs = await chamvi.list_runs(agent=agent, limit=1)
                return runs[0].run_id if runs else None

            run_id = await eventually(a_run, f"a run of schedule {schedule_id}")
            view = await chamvi.wait(run_id)
        finally:
            await chamvi.schedules.delete(schedule_id)
    assert view.status == RunStatus.COMPLETED
    assert view.output == "today: nothing new"
    assert view.trigger.trigger == SCHEDULE_TRIGGER
    assert view.trigger.payload == {"topic": "news"}


@tool
async def publish(ctx: ToolContext) -> str:
    """Publishes the digest once a person approves; until then the run waits."""
    decision = await approve(ctx, title="Publish the digest?")
    return "published" if decision.approved else "not published"


async def test_with_overlap_skip_no_fire_starts_a_run_while_the_last_one_goes_on(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    agent, schedule_id = unique("publisher"), unique("skip")
    models = ModelRegistry()
    models.register("scripted/publish", ScriptedModel([call("publish"), reply("done")]))
    app = App(
        agents=[define_agent(name=agent, model="scripted/publish", instructions="x", tools=[publish])],
        models=models,
    )
    handle = client.get_schedule_handle(SCHEDULE_ID_PREFIX + schedule_id)
    async with running_worker(app):
        await chamvi.schedules.create(agent, every="1s", id=schedule_id, overlap="skip")
        try:

            async def skipped() -> int | None:
                info = (await handle.describe()).info
                return info.num_actions_skipped_overlap if info.num_actions_skipped_overlap >= 2 else None

            await eventually(skipped, "fires skipped while the first run waits")
            await handle.pause()
            runs = await chamvi.list_runs(agent=agent)
            for run in runs:
                await chamvi.cancel(run.run_id)
        finally:
            await chamvi.schedules.delete(schedule_id)
    assert len(runs) == 1
    assert (await chamvi.get_run(runs[0].run_id)).status in (RunStatus.WAITING, RunStatus.CANCELLED)


async def test_a_fire_repeated_over_the_same_time_starts_one_run(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    agent, schedule_id = unique("digest"), unique("yearly")
    fire = datetime(2026, 1, 1, tzinfo=UTC)  # in the past: it fires only through the backfills
    window = ScheduleBackfill(
        start_at=fire - timedelta(minutes=1),
        end_at=fire + timedelta(minutes=1),
        overlap=ScheduleOverlapPolicy.ALLOW_ALL,
    )
    fire_workflow = f"{SCHEDULED_RUN_ID_PREFIX}{schedule_id}-{fire.strftime('%Y-%m-%dT%H:%M:%SZ')}"

    async def fires(count: int) -> list[ScheduledRunResult] | None:
        found = [
            execution
            async for execution in client.list_workflows(f'WorkflowId = "{fire_workflow}"')
            if execution.status == WorkflowExecutionStatus.COMPLETED
        ]
        if len(found) < count:
            return None
        return [
            await client.get_workflow_handle(
                fire_workflow, run_id=execution.run_id, result_type=ScheduledRunResult
            ).result()
            for execution in found
        ]

    async with running_worker(digest_app(agent)):
        await chamvi.schedules.create(agent, cron="0 0 1 1 *", id=schedule_id)
        handle = client.get_schedule_handle(SCHEDULE_ID_PREFIX + schedule_id)
        try:
            await handle.backfill(window)
            await eventually(lambda: fires(1), "the first fire")
            await handle.backfill(window)  # the same fire time again
            results = await eventually(lambda: fires(2), "the repeated fire")
        finally:
            await chamvi.schedules.delete(schedule_id)
        runs = await chamvi.list_runs(agent=agent)
    assert sorted(r.created for r in results) == [False, True]
    assert len({r.run_id for r in results}) == 1
    assert {r.status for r in results} == {RunStatus.COMPLETED}
    assert [r.run_id for r in runs] == [results[0].run_id]


async def test_a_schedule_of_an_agent_the_workers_lack_fails_its_fire_without_retrying(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    schedule_id = unique("nobody")
    async with running_worker(digest_app(unique("digest"))):
        await chamvi.schedules.create("no-such-agent", cron="0 0 1 1 *", id=schedule_id)
        try:
            await client.get_schedule_handle(SCHEDULE_ID_PREFIX + schedule_id).trigger()

            async def failed() -> bool | None:
                async for execution in client.list_workflows(
                    f'WorkflowId STARTS_WITH "{SCHEDULED_RUN_ID_PREFIX}{schedule_id}-"'
                ):
                    if execution.status == WorkflowExecutionStatus.FAILED:
                        return True
                return None

            await eventually(failed, "the fire failing")
        finally:
            await chamvi.schedules.delete(schedule_id)


async def test_creating_a_schedule_whose_id_exists_is_a_conflict(chamvi: ChamviClient) -> None:
    schedule_id = unique("twice")
    await chamvi.schedules.create("digest", cron="@daily", id=schedule_id)
    try:
        with pytest.raises(ConflictError, match=f"schedule '{schedule_id}' exists"):
            await chamvi.schedules.create("digest", every="1h", id=schedule_id)
    finally:
        await chamvi.schedules.delete(schedule_id)


async def test_pausing_unpausing_and_deleting_an_unknown_schedule_name_it(chamvi: ChamviClient) -> None:
    for operation in (
        chamvi.schedules.pause,
        chamvi.schedules.unpause,
        chamvi.schedules.delete,
        chamvi.schedules.get,
    ):
        with pytest.raises(ScheduleNotFoundError, match="no schedule 'never-made'"):
            await operation("never-made")


async def test_code_declared_schedules_are_created_on_worker_start_updated_when_changed_and_deleted_when_gone(
    client: Client, chamvi: ChamviClient, task_queue: str
) -> None:
    agent, declared, kept = unique("digest"), unique("declared"), unique("runtime")

    async def start_worker(app: App) -> None:
        plugin = ChamviPlugin(app, index=memory_index())
        async with build_worker(client, plugin, task_queue=task_queue):
            await plugin.schedules_started()

    first = digest_app(agent)
    first.schedule(agent, cron="0 8 * * *", id=declared)
    await chamvi.schedules.create(agent, every="1h", id=kept)
    try:
        await start_worker(first)
        created = await chamvi.schedules.get(declared)
        await chamvi.schedules.pause(declared, note="holiday")

        changed = digest_app(agent)
        changed.schedule(
            agent, cron="30 9 * * 1-5", id=declared, payload={"team": "ops"}, timezone="Europe/Madrid"
        )
        await start_worker(changed)
        updated = await chamvi.schedules.get(declared)

        async def listed() -> list[str] | None:
            ids = [s.id for s in await chamvi.schedules.list()]
            return ids if declared in ids and kept in ids else None

        await eventually(listed, "both schedules listed")
        await start_worker(digest_app(agent))  # the code no longer declares it
        with pytest.raises(ScheduleNotFoundError):
            await chamvi.schedules.get(declared)
        survivor = await chamvi.schedules.get(kept)
    finally:
        await _delete_quietly(chamvi, declared)
        await _delete_quietly(chamvi, kept)
    assert (created.cron, created.agent, created.declared, created.paused) == (
        "0 8 * * *",
        agent,
        True,
        False,
    )
    assert created.next_fires
    assert (updated.cron, updated.timezone, updated.payload) == (
        "30 9 * * 1-5",
        "Europe/Madrid",
        {"team": "ops"},
    )
    assert updated.paused and updated.note == "holiday"
    assert not survivor.declared and survivor.every_seconds == 3600


async def test_the_example_daily_digest_is_declared_and_its_fire_posts_one_digest(
    client: Client,
    chamvi: ChamviClient,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    from examples.support.app import app

    plugin = ChamviPlugin(app, index=memory_index(), start_collections=False)
    async with build_worker(client, plugin, task_queue=task_queue):
        await plugin.schedules_started()
        declared = await chamvi.schedules.get("daily-digest")
        await client.get_schedule_handle(SCHEDULE_ID_PREFIX + "daily-digest").trigger()

        async def a_digest() -> str | None:
            # other tests run the example's digest agent by hand on other task queues of this server
            query = f'WorkflowType = "{AGENT_RUN_WORKFLOW}" AND TaskQueue = "{task_queue}"'
            async for execution in client.list_workflows(query):
                if execution.close_time is not None:
                    return execution.id
            return None

        run = await chamvi.get_run(await eventually(a_digest, "the digest run"))
    assert (declared.agent, declared.cron, declared.declared) == ("digest", "0 8 * * *", True)
    assert run.status == RunStatus.COMPLETED and run.trigger.trigger == SCHEDULE_TRIGGER
    posted = (tmp_path / "digests.jsonl").read_text().splitlines()
    assert len(posted) == 1 and "1 delivered, 1 in transit" in posted[0]
