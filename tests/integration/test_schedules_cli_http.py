"""Agent schedules through `chamvi schedules ...` and over real HTTP, against a real worker."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import httpx
import pytest
from click.testing import CliRunner, Result
from temporalio.client import Client

from chamvi import ChamviClient, RunStatus
from chamvi._constants import SCHEDULE_TRIGGER
from chamvi.cli import cli
from chamvi.errors import ScheduleNotFoundError
from chamvi.http import create_api
from chamvi.runtime import build_worker
from tests.integration.test_schedules import digest_app, unique
from tests.polling import eventually
from tests.support.http_api import bearer, make_tokens, serving


@pytest.fixture
def chamvi_cli(client: Client, task_queue: str) -> Callable[..., asyncio.Future[Result]]:
    """``await chamvi_cli("schedules", "list")`` against the session server, on this test's queue."""
    address = client.service_client.config.target_host

    def run(*args: str) -> asyncio.Future[Result]:
        argv = [*args, "--address", address, "--namespace", client.namespace, "--task-queue", task_queue]
        return asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, cli, argv))

    return run


@pytest.fixture
async def agent(client: Client, task_queue: str) -> AsyncIterator[str]:
    """A worker serving a digest agent whose name is unique to the test."""
    name = unique("digest")
    async with build_worker(client, digest_app(name), task_queue=task_queue):
        yield name


async def _listed(chamvi: ChamviClient, schedule_id: str) -> bool | None:
    return True if schedule_id in [s.id for s in await chamvi.schedules.list()] else None


async def test_the_cli_creates_lists_pauses_unpauses_and_deletes_a_schedule(
    chamvi_cli, chamvi: ChamviClient, agent: str
) -> None:
    schedule_id = unique("cli")
    created = await chamvi_cli(
        "schedules", "create", agent, "--cron", "0 8 * * 1-5", "--timezone", "Europe/Madrid",
        "--payload", '{"topic": "ops"}', "--id", schedule_id, "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    view = json.loads(created.stdout)
    assert (view["id"], view["agent"], view["cron"], view["payload"]) == (
        schedule_id, agent, "0 8 * * 1-5", {"topic": "ops"},
    )  # fmt: skip
    await eventually(lambda: _listed(chamvi, schedule_id), "the schedule listed")
    listed = await chamvi_cli("schedules", "list")
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if line.startswith(schedule_id))
    assert agent in row and "0 8 * * 1-5 (Europe/Madrid)" in row and "active" in row and "runtime" in row

    paused = await chamvi_cli("schedules", "pause", schedule_id, "--note", "holiday")
    assert (paused.exit_code, paused.stdout.strip()) == (0, f"paused schedule {schedule_id}")
    shown = await chamvi_cli("schedules", "show", schedule_id)
    assert "state     paused (holiday)" in shown.stdout
    unpaused = await chamvi_cli("schedules", "unpause", schedule_id)
    assert (unpaused.exit_code, unpaused.stdout.strip()) == (0, f"unpaused schedule {schedule_id}")
    assert not (await chamvi.schedules.get(schedule_id)).paused

    deleted = await chamvi_cli("schedules", "delete", schedule_id)
    assert (deleted.exit_code, deleted.stdout.strip()) == (0, f"deleted schedule {schedule_id}")
    with pytest.raises(ScheduleNotFoundError):
        await chamvi.schedules.get(schedule_id)


async def test_the_cli_names_bad_schedule_input(chamvi_cli, agent: str) -> None:
    cases = [
        (("schedules", "create", "nosuch-agent", "--every", "1h"), "unknown agent 'nosuch-agent'"),
        (("schedules", "create", agent, "--every", "1h", "--cron", "@daily"), "not both"),
        (("schedules", "create", agent), "not neither"),
        (("schedules", "create", agent, "--cron", "0 25 * * *"), "hour '25' is out of range 0-23"),
        (("schedules", "create", agent, "--every", "soon"), "every 'soon' is not an interval"),
        (("schedules", "pause", "never-made"), "no schedule 'never-made'"),
        (("schedules", "delete", "never-made"), "no schedule 'never-made'"),
    ]
    for args, problem in cases:
        result = await chamvi_cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert problem in result.output, (args, result.output)


@pytest.fixture
async def http(
    client: Client, task_queue: str, agent: str
) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    tokens = make_tokens(writer=["schedules:*"], reader=["schedules:read"], runs=["runs:*"])
    api = create_api(
        tokens=list(tokens.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue),
        agents=[agent],
        schedule_min_interval=timedelta(seconds=1),  # a schedule's fires within a test's patience
    )
    async with serving(api) as url:
        yield lambda token: httpx.AsyncClient(base_url=url, headers=bearer(tokens[token]), timeout=30)


async def test_http_creates_lists_pauses_and_deletes_a_schedule_whose_fires_start_runs(
    http, chamvi: ChamviClient, agent: str
) -> None:
    schedule_id = unique("http")
    async with http("writer") as writer, http("reader") as reader:
        created = await writer.post(
            "/schedules", json={"agent": agent, "every": "1s", "id": schedule_id, "payload": {"n": 1}}
        )
        assert created.status_code == 201, created.text
        assert (created.json()["every_seconds"], created.json()["overlap"]) == (1, "skip")

        async def a_run() -> str | None:
            runs = await chamvi.list_runs(agent=agent, limit=1)
            return runs[0].run_id if runs else None

        run = await chamvi.wait(await eventually(a_run, "a run of the schedule"))
        assert (run.status, run.trigger.trigger, run.trigger.payload) == (
            RunStatus.COMPLETED, SCHEDULE_TRIGGER, {"n": 1},
        )  # fmt: skip

        async def listed() -> bool | None:
            page = await reader.get("/schedules")
            return True if schedule_id in [s["id"] for s in page.json()["data"]] else None

        await eventually(listed, "the schedule listed")
        paused = await writer.post(f"/schedules/{schedule_id}/pause", json={"note": "quiet"})
        assert (paused.status_code, paused.json()["paused"], paused.json()["note"]) == (200, True, "quiet")
        shown = await reader.get(f"/schedules/{schedule_id}")
        assert shown.json()["paused"] is True
        unpaused = await writer.post(f"/schedules/{schedule_id}/unpause")
        assert (unpaused.status_code, unpaused.json()["paused"]) == (200, False)
        assert (await writer.delete(f"/schedules/{schedule_id}")).status_code == 204
        gone = await reader.get(f"/schedules/{schedule_id}")
        assert (gone.status_code, gone.json()["error"]["code"]) == (404, "schedule_not_found")


async def test_http_schedule_routes_need_their_permissions_and_name_bad_input(http, agent: str) -> None:
    async with http("writer") as writer, http("reader") as reader, http("runs") as runs:
        refused = await reader.post("/schedules", json={"agent": agent, "every": "1h"})
        assert refused.status_code == 403
        assert "'schedules:write'" in refused.json()["error"]["message"]
        assert (await runs.get("/schedules")).status_code == 403
        bodies = [
            ({"agent": "nosuch", "every": "1h"}, 404, "agent_not_found"),
            ({"agent": agent}, 422, "invalid_schedule"),
            ({"agent": agent, "every": "1h", "cron": "@daily"}, 422, "invalid_schedule"),
            ({"agent": agent, "cron": "0 8 * *"}, 422, "invalid_schedule"),
            ({"agent": agent, "every": "1h", "overlap": "x"}, 422, "validation_error"),
        ]
        answers = [
            (await writer.post("/schedules", json=body), status, code) for body, status, code in bodies
        ]
        answers.append(
            (await writer.post(f"/schedules/{uuid.uuid4().hex[:6]}-x/pause"), 404, "schedule_not_found")
        )
        answers.append((await writer.delete("/schedules/never-made"), 404, "schedule_not_found"))
    for answer, status, code in answers:
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.text


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"every": "99999999999d"}, "longer than 100 years"),
        ({"every": "9" * 39 + "s"}, "longer than 100 years"),
        ({"cron": "0 0 31 2 *"}, "never fires"),
        ({"every": "30s"}, "more often than once every 1 min"),
        ({"cron": "* * * * *"}, None),
        ({"every": "1m"}, None),
    ],
)
async def test_http_refuses_a_schedule_out_of_bounds_as_invalid_schedule(
    client: Client, task_queue: str, agent: str, body: dict[str, str], problem: str | None
) -> None:
    tokens = make_tokens(writer=["schedules:*"])
    runs = ChamviClient(client, task_queue=task_queue)
    schedule_id = unique("bounds")
    api = create_api(tokens=list(tokens.values()), managed=None, runs=runs, agents=[agent])  # 1 min at least
    async with serving(api) as url, httpx.AsyncClient(base_url=url, headers=bearer(tokens["writer"])) as http:
        answer = await http.post("/schedules", json={"agent": agent, "id": schedule_id, **body})
        if problem is None:
            await http.delete(f"/schedules/{schedule_id}")
    if problem is None:
        assert answer.status_code == 201, answer.text
    else:
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_schedule"), answer.text
        assert problem in answer.json()["error"]["message"]
