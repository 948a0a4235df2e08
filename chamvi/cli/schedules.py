"""Agent schedules: ``chamvi schedules list / show / create / pause / unpause / delete``.

Each is a Temporal Schedule (``chamvi-schedule:<id>``, on the Temporal UI's Schedules page) whose
fires dispatch ordinary runs. Schedules declared in the app's code (``App.schedule``) are kept by the
workers; the ones created here stay until deleted.
"""

from __future__ import annotations

from datetime import timedelta

import click

from chamvi.cli._common import json_option, run_with_client, temporal_options
from chamvi.cli._output import columns, dump, echo_err, short, when
from chamvi.cli.runs import _parse_payload
from chamvi.client import AGENT_CHECK_TIMEOUT, ChamviClient
from chamvi.models import ScheduleView
from chamvi.schedules import OVERLAPS
from chamvi.settings import Settings


def _every(view: ScheduleView) -> str:
    if view.cron is not None:
        return view.cron + (f" ({view.timezone})" if view.timezone else "")
    return f"every {timedelta(seconds=view.every_seconds or 0)}"


def _table(rows: list[ScheduleView]) -> list[str]:
    header = ("SCHEDULE", "AGENT", "WHEN", "STATE", "FROM", "NEXT")
    cells = [header] + [
        (
            v.id,
            v.agent,
            _every(v),
            "paused" if v.paused else "active",
            "code" if v.declared else "runtime",
            when(v.next_fires[0]) if v.next_fires and not v.paused else "-",
        )
        for v in rows
    ]
    return columns(cells)


def _show(view: ScheduleView) -> list[str]:
    lines = [
        f"schedule  {view.id}",
        f"agent     {view.agent}",
        f"when      {_every(view)}",
        f"overlap   {view.overlap}",
        f"state     {'paused' if view.paused else 'active'}" + (f" ({view.note})" if view.note else ""),
        f"from      {'the app code' if view.declared else 'runtime'}",
        f"payload   {short(view.payload)}",
    ]
    lines.extend(f"next      {when(moment)}" for moment in view.next_fires[:3])
    lines.extend(f"fired     {when(moment)}" for moment in view.recent_fires[-3:])
    return lines


def _print(view: ScheduleView, as_json: bool) -> None:
    if as_json:
        click.echo(dump(view))
    else:
        for line in _show(view):
            click.echo(line)


@click.group()
def schedules() -> None:
    """Temporal Schedules that start agent runs (a cron or an interval)."""


@schedules.command("list")
@json_option()
@temporal_options()
def list_schedules(as_json: bool, settings: Settings) -> None:
    """List the agent schedules of the namespace (from Temporal's visibility: a new one shows in a moment)."""
    found = run_with_client(settings, lambda chamvi: chamvi.schedules.list())
    if as_json:
        click.echo(dump(found))
    elif not found:
        echo_err("no schedules")
    else:
        for line in _table(found):
            click.echo(line)


@schedules.command("show")
@click.argument("schedule_id", metavar="SCHEDULE")
@json_option()
@temporal_options()
def show_schedule(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Show a schedule: agent, cron or interval, state, next and recent fires."""
    _print(run_with_client(settings, lambda chamvi: chamvi.schedules.get(schedule_id)), as_json)


@schedules.command("create")
@click.argument("agent")
@click.option("--cron", metavar="EXPR", help="Five cron fields, such as '0 8 * * 1-5', or @daily.")
@click.option("--every", metavar="INTERVAL", help="An interval such as 90s, 15m, 1h30m or 1d.")
@click.option("--timezone", metavar="ZONE", help="The IANA zone the cron is read in [default: UTC].")
@click.option("--payload", metavar="JSON", help="Each run's payload as JSON ('-' reads it from stdin).")
@click.option(
    "--overlap",
    type=click.Choice(OVERLAPS),
    default="skip",
    show_default=True,
    help="What a fire does while the last run goes on.",
)
@click.option("--id", "schedule_id", help="The schedule's id [default: the agent's name].")
@json_option()
@temporal_options()
def create_schedule(
    agent: str,
    cron: str | None,
    every: str | None,
    timezone: str | None,
    payload: str | None,
    overlap: str,
    schedule_id: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Create a schedule that runs AGENT on a --cron or --every interval.

    A worker on the task queue is asked first whether its app serves AGENT.
    """
    value = _parse_payload(payload)

    async def go(chamvi: ChamviClient) -> ScheduleView:
        if not await chamvi.agents.check(agent):
            echo_err(
                f"no worker answered on task queue {settings.task_queue!r} within "
                f"{AGENT_CHECK_TIMEOUT.total_seconds():g} s: the schedule is created, and its fires wait "
                "for a worker (`chamvi dev` or `chamvi worker`)"
            )
        return await chamvi.schedules.create(
            agent, cron=cron, every=every, payload=value, overlap=overlap, id=schedule_id, timezone=timezone
        )

    _print(run_with_client(settings, go), as_json)


def _pause_command(name: str, paused: bool, doc: str) -> None:
    """``pause`` and ``unpause``: one shape, the state they set differs."""

    @schedules.command(name, help=doc)
    @click.argument("schedule_id", metavar="SCHEDULE")
    @click.option("--note", help="Why; the Temporal UI shows it.")
    @temporal_options()
    def command(schedule_id: str, note: str | None, settings: Settings) -> None:
        if paused:
            run_with_client(settings, lambda chamvi: chamvi.schedules.pause(schedule_id, note))
        else:
            run_with_client(settings, lambda chamvi: chamvi.schedules.unpause(schedule_id, note))
        click.echo(f"{name}d schedule {schedule_id}")


_pause_command(
    "pause", True, "Stop SCHEDULE's fires until it is unpaused (a worker's restart keeps it paused)."
)
_pause_command("unpause", False, "Let SCHEDULE fire again.")


@schedules.command("delete")
@click.argument("schedule_id", metavar="SCHEDULE")
@temporal_options()
def delete_schedule(schedule_id: str, settings: Settings) -> None:
    """Delete SCHEDULE; runs it started go on (one the app declares comes back with the next worker)."""
    run_with_client(settings, lambda chamvi: chamvi.schedules.delete(schedule_id))
    click.echo(f"deleted schedule {schedule_id}")
