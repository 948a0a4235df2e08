"""Scheduled triggers: an agent run started by a Temporal Schedule, on a cron or every interval.

Each agent schedule is a Temporal Schedule (``chamvi-schedule:<id>``, on the Temporal UI's Schedules
page) whose action starts the small ``ChamviScheduledRun`` workflow. That workflow reads the fire's
nominal time from Temporal's ``TemporalScheduledStartTime`` attribute and dispatches an ordinary run
through the path ``ChamviClient.dispatch`` takes, with an idempotency key made of the schedule id and
that time. The run's id is derived from the key, so whatever repeats a fire (the dispatch activity
retried after a worker died between starting the run and reporting it, a backfill over a window that
already fired, a fire workflow started twice) finds the run that fire started and starts none.
Starting ``AgentRun`` straight from the Schedule would give a fresh id per action and lose that: the
Schedule's own id suffix is not an idempotency key the run, the client or the API know.

Schedules are declared in code (``App.schedule``: the worker lifecycle creates, updates and deletes
them) or created at runtime (``client.schedules.create``, ``chamvi schedules create``,
``POST /schedules``: kept until deleted).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import re
import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any, TypedDict, Unpack, get_args

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi._cron import parse_cron, shortest_cron_gap
from chamvi._on_error import ErrorHook
from chamvi.errors import (
    BackgroundError,
    ChamviError,
    ConflictError,
    InvalidScheduleError,
    ScheduleNotFoundError,
)
from chamvi.models import Invoker, Overlap, RunInput, ScheduledDispatch, ScheduledRunInput, ScheduleView

log = logging.getLogger(__name__)

OVERLAPS: tuple[str, ...] = get_args(Overlap)
_OVERLAP_POLICY = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}

MIN_EVERY = timedelta(seconds=1)
"""Temporal's Schedules act at most once a second."""

MAX_EVERY = timedelta(days=36_500)
"""A hundred years: Temporal holds intervals as Go durations, which end near 292 years."""
DEFAULT_MIN_INTERVAL = timedelta(minutes=1)
"""The shortest gap between fires ``POST /schedules`` accepts (``CHAMVI_SCHEDULE_MIN_INTERVAL``)."""
_EVERY = re.compile(r"^(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")
_SECONDS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


def validate_cron(cron: str) -> str:
    """Checks a cron expression before Temporal sees it, so a typo is named, not a server error.

    Raises:
        InvalidScheduleError: not five valid fields (nor a shortcut such as ``@daily``), or one that
            never fires (``0 0 31 2 *``).
    """
    parse_cron(cron)
    return cron.strip()


def parse_every(every: timedelta | str) -> timedelta:
    """An interval from a ``timedelta`` or a text such as ``90s``, ``15m``, ``1h30m``, ``1d``.

    Raises:
        InvalidScheduleError: not an interval, under a second, over a hundred years, or not in whole
            seconds.
    """
    if isinstance(every, str):
        match = _EVERY.match(every.strip())
        if match is None or not every.strip():
            raise InvalidScheduleError(
                f"every {every!r} is not an interval: use numbers with d, h, m or s, such as '15m' or '1h30m'"
            )
        # counted in whole seconds before a timedelta is built: '99999999999d' overflows one, and a
        # number of thousands of digits is past what int() reads
        too_long = any(len(match[unit] or "") > 12 for unit in _SECONDS)
        seconds = 0 if too_long else sum(int(match[u] or 0) * size for u, size in _SECONDS.items())
        if too_long or seconds > MAX_EVERY.total_seconds():
            raise InvalidScheduleError(f"every {every!r} is longer than 100 years: {_EVERY_HELP}")
        every = timedelta(seconds=seconds)
    if not isinstance(every, timedelta):
        raise InvalidScheduleError(f"every {every!r} is not an interval: give a timedelta or text like '15m'")
    if every > MAX_EVERY:
        raise InvalidScheduleError(f"every {every} is longer than 100 years: {_EVERY_HELP}")
    if every < MIN_EVERY or every.microseconds:
        raise InvalidScheduleError(f"every {every} is not a whole number of seconds of at least 1 s")
    return every


_EVERY_HELP = "Temporal's intervals end near 292 years; use a cron for rare dates ('0 0 1 1 *')"


def shortest_gap(schedule: AgentSchedule) -> timedelta:
    """The shortest time between two fires of ``schedule``: its interval, or what its cron allows."""
    if schedule.every is not None:
        return schedule.every
    assert schedule.cron is not None
    return shortest_cron_gap(parse_cron(schedule.cron))


def check_min_interval(schedule: AgentSchedule, minimum: timedelta) -> None:
    """Refuses a schedule that fires more often than ``minimum`` (one token, a run a second).

    Raises:
        InvalidScheduleError: naming the gap, the minimum and where the minimum is set.
    """
    gap = shortest_gap(schedule)
    if gap >= minimum:
        return
    shortest, allowed = describe_interval(gap), describe_interval(minimum)
    where = "this server's minimum (CHAMVI_SCHEDULE_MIN_INTERVAL)"
    if schedule.every is not None:
        raise InvalidScheduleError(
            f"schedule {schedule.id!r}: every {shortest} is more often than once every {allowed}, {where}"
        )
    raise InvalidScheduleError(
        f"schedule {schedule.id!r}: cron {schedule.cron!r} fires as often as every {shortest}, more often "
        f"than once every {allowed}, {where}"
    )


def describe_interval(interval: timedelta) -> str:
    """``90 s``, ``15 min``, ``2 h``, ``1 d``: an interval in its largest whole unit."""
    seconds = int(interval.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


@dataclass(frozen=True)
class AgentSchedule:
    """A validated agent schedule (build it with :func:`define_schedule` or ``App.schedule``).

    Attributes:
        id: the schedule's id; its Temporal Schedule is ``chamvi-schedule:<id>``.
        agent: the agent each fire runs.
        cron: a five-field cron expression (or ``@daily`` ...), exclusive with ``every``.
        every: an interval, exclusive with ``cron``.
        timezone: the IANA zone ``cron`` is read in; UTC when None.
        payload: each run's payload (JSON).
        overlap: what a fire does while the previous run goes on (see :data:`chamvi.models.Overlap`).
    """

    id: str
    agent: str
    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None
    payload: Any = None
    overlap: Overlap = "skip"


class ScheduleOptions(TypedDict, total=False):
    """What a schedule takes besides its agent (``App.schedule``, ``client.schedules.create``).

    Attributes:
        cron: a five-field cron expression (``"0 8 * * 1-5"``) or a shortcut (``"@daily"``); exactly
            one of ``cron`` and ``every``.
        every: an interval (``timedelta(minutes=15)`` or ``"15m"``).
        payload: each run's payload; must be JSON.
        overlap: ``skip`` (the default: no fire while the last run goes on), ``buffer_one``,
            ``buffer_all`` or ``allow_all``.
        id: the schedule's id; the agent's name when not given.
        timezone: the IANA zone the cron is read in (``"Europe/Madrid"``); UTC when not given.
    """

    cron: str | None
    every: timedelta | str | None
    payload: Any
    overlap: str
    id: str | None
    timezone: str | None


def _check_name(what: str, name: Any) -> str:
    if not isinstance(name, str) or not re.match(c.NAME_PATTERN, name) or len(name) > c.NAME_MAX_LENGTH:
        raise InvalidScheduleError(
            f"{what} {name!r} is invalid: use lowercase letters and digits in words joined by single '-', "
            f"at most {c.NAME_MAX_LENGTH} characters"
        )
    return name


def define_schedule(agent: str, **options: Unpack[ScheduleOptions]) -> AgentSchedule:
    """Validates a schedule of ``agent``: exactly one of ``cron`` and ``every`` (:class:`ScheduleOptions`).

    Raises:
        InvalidScheduleError: the problem, named.
    """
    cron, every, timezone = options.get("cron"), options.get("every"), options.get("timezone")
    payload, overlap, id = options.get("payload"), options.get("overlap", "skip"), options.get("id")
    known = ScheduleOptions.__annotations__
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InvalidScheduleError(f"unknown schedule option(s) {', '.join(unknown)}: use {', '.join(known)}")
    _check_name("agent name", agent)
    schedule_id = _check_name("schedule id", agent if id is None else id)
    if (cron is None) == (every is None):
        raise InvalidScheduleError(
            f"schedule {schedule_id!r} needs exactly one of cron= and every=, "
            f"not {'both' if cron is not None else 'neither'}"
        )
    if overlap not in OVERLAPS:
        raise InvalidScheduleError(
            f"schedule {schedule_id!r}: overlap {overlap!r} is unknown: use one of {', '.join(OVERLAPS)}"
        )
    if timezone is not None:
        if every is not None:
            raise InvalidScheduleError(f"schedule {schedule_id!r}: timezone= applies to cron= only")
        try:
            zoneinfo.ZoneInfo(timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise InvalidScheduleError(
                f"schedule {schedule_id!r}: timezone {timezone!r} is unknown: use an IANA name such as "
                "'Europe/Madrid'"
            ) from None
    try:
        json.dumps(payload)
    except (TypeError, ValueError) as error:
        raise InvalidScheduleError(f"schedule {schedule_id!r}: payload is not JSON: {error}") from None
    return AgentSchedule(
        id=schedule_id,
        agent=agent,
        cron=validate_cron(cron) if cron is not None else None,
        every=parse_every(every) if every is not None else None,
        timezone=timezone,
        payload=payload,
        overlap=overlap,  # type: ignore[arg-type]  # checked against OVERLAPS above
    )


def scheduled_run_input(request: ScheduledDispatch) -> RunInput:
    """The run a fire starts: its idempotency key is the schedule id and the fire's nominal time.

    The invoker is the schedule, so the key is scoped to it, and the run shows where it came from.
    """
    fire_time = request.fire_time.astimezone(UTC).isoformat()
    return RunInput(
        agent=request.agent,
        payload=request.payload,
        trigger=c.SCHEDULE_TRIGGER,
        invoker=Invoker(id=request.schedule_id, kind=c.SCHEDULE_TRIGGER),
        idempotency_key=f"{request.schedule_id}@{fire_time}",
    )


# -- Temporal Schedules -------------------------------------------------------------------------------


def temporal_schedule(schedule: AgentSchedule, task_queue: str, *, declared: bool) -> Schedule:
    """The Temporal Schedule that fires ``schedule`` on ``task_queue``."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            c.SCHEDULED_RUN_WORKFLOW,
            ScheduledRunInput(
                schedule_id=schedule.id,
                agent=schedule.agent,
                payload=schedule.payload,
                overlap=schedule.overlap,
                cron=schedule.cron,
                every_seconds=schedule.every.total_seconds() if schedule.every is not None else None,
                timezone=schedule.timezone,
                declared=declared,
            ),
            id=c.SCHEDULED_RUN_ID_PREFIX + schedule.id,
            task_queue=task_queue,
            static_summary=f"{schedule.agent} (schedule {schedule.id})",
        ),
        spec=ScheduleSpec(
            cron_expressions=[schedule.cron] if schedule.cron is not None else [],
            intervals=[ScheduleIntervalSpec(every=schedule.every)] if schedule.every is not None else [],
            time_zone_name=schedule.timezone,
        ),
        policy=SchedulePolicy(overlap=_OVERLAP_POLICY[schedule.overlap]),
    )


async def _definition(
    client: Client, description: ScheduleDescription
) -> tuple[ScheduledRunInput, str] | None:
    """The agent schedule's input and task queue, or None for a Schedule that is not one."""
    action = description.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow != c.SCHEDULED_RUN_WORKFLOW:
        return None
    args = list(action.args)
    if len(args) != 1:
        return None
    decoded = await client.data_converter.decode(args, [ScheduledRunInput])
    return decoded[0], action.task_queue


def _view(description: ScheduleDescription, definition: ScheduledRunInput) -> ScheduleView:
    state = description.schedule.state
    return ScheduleView(
        **definition.model_dump(exclude={"schedule_id"}),
        id=definition.schedule_id,
        paused=state.paused,
        note=state.note or None,
        next_fires=list(description.info.next_action_times),
        recent_fires=[action.scheduled_at for action in description.info.recent_actions],
    )


def _unknown(schedule_id: str) -> ScheduleNotFoundError:
    return ScheduleNotFoundError(f"no schedule {schedule_id!r}: `chamvi schedules list` shows them")


async def _describe(client: Client, schedule_id: str) -> tuple[ScheduleDescription, ScheduledRunInput, str]:
    try:
        description = await client.get_schedule_handle(c.SCHEDULE_ID_PREFIX + schedule_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise _unknown(schedule_id) from None
        raise
    definition = await _definition(client, description)
    if definition is None:
        raise _unknown(schedule_id)
    return description, *definition


async def get_schedule(client: Client, schedule_id: str) -> ScheduleView:
    """The schedule ``schedule_id`` as Temporal holds it.

    Raises:
        ScheduleNotFoundError: there is none.
    """
    description, definition, _ = await _describe(client, schedule_id)
    return _view(description, definition)


async def _schedule_ids(client: Client) -> list[str]:
    ids: list[str] = []
    async for listed in await client.list_schedules():
        if listed.id.startswith(c.SCHEDULE_ID_PREFIX):
            ids.append(listed.id.removeprefix(c.SCHEDULE_ID_PREFIX))
    return sorted(ids)


async def list_schedules(client: Client) -> list[ScheduleView]:
    """Every agent schedule of the namespace, by id (from Temporal's visibility, which lags a moment)."""
    views: list[ScheduleView] = []
    for schedule_id in await _schedule_ids(client):
        try:
            views.append(await get_schedule(client, schedule_id))
        except ScheduleNotFoundError:
            continue  # deleted since it was listed
    return views


def _refused(schedule_id: str, error: RPCError) -> Exception:
    """A spec Temporal refused (a cron the check above let through) is the caller's mistake."""
    if error.status == RPCStatusCode.INVALID_ARGUMENT:
        return InvalidScheduleError(f"Temporal refused schedule {schedule_id!r}: {error.message}")
    return error


async def create_schedule(client: Client, task_queue: str, schedule: AgentSchedule) -> ScheduleView:
    """Creates ``schedule`` at runtime (kept until deleted).

    Raises:
        ConflictError: a schedule with this id exists.
        InvalidScheduleError: Temporal refused the spec.
    """
    try:
        await client.create_schedule(
            c.SCHEDULE_ID_PREFIX + schedule.id, temporal_schedule(schedule, task_queue, declared=False)
        )
    except ScheduleAlreadyRunningError:
        raise ConflictError(
            f"schedule {schedule.id!r} exists: delete it first (`chamvi schedules delete {schedule.id}`) "
            "or choose another id"
        ) from None
    except RPCError as error:
        raise _refused(schedule.id, error) from None
    return await get_schedule(client, schedule.id)


async def put_declared(client: Client, task_queue: str, schedule: AgentSchedule) -> bool:
    """Creates a schedule declared in code, or brings an existing one up to the code; True when created.

    A paused schedule stays paused: pausing is an operator's decision the code does not know of.
    """
    wanted = temporal_schedule(schedule, task_queue, declared=True)
    schedule_id = c.SCHEDULE_ID_PREFIX + schedule.id
    try:
        await client.create_schedule(schedule_id, wanted)
        return True
    except ScheduleAlreadyRunningError:
        pass
    except RPCError as error:
        raise _refused(schedule.id, error) from None

    def update(current: ScheduleUpdateInput) -> ScheduleUpdate:
        state = current.description.schedule.state
        return ScheduleUpdate(
            schedule=Schedule(
                action=wanted.action,
                spec=wanted.spec,
                policy=wanted.policy,
                state=ScheduleState(paused=state.paused, note=state.note),
            )
        )

    await client.get_schedule_handle(schedule_id).update(update)
    return False


async def set_paused(client: Client, schedule_id: str, paused: bool, note: str | None = None) -> None:
    """Pauses or unpauses a schedule; the note shows on the Temporal UI.

    Raises:
        ScheduleNotFoundError: there is none.
    """
    await _describe(client, schedule_id)
    handle = client.get_schedule_handle(c.SCHEDULE_ID_PREFIX + schedule_id)
    try:
        if paused:
            await handle.pause(note=note or "paused through chamvi")
        else:
            await handle.unpause(note=note or "unpaused through chamvi")
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise _unknown(schedule_id) from None
        raise


async def delete_schedule(client: Client, schedule_id: str) -> None:
    """Deletes a schedule; runs it started go on.

    Raises:
        ScheduleNotFoundError: there is none.
    """
    await _describe(client, schedule_id)
    try:
        await client.get_schedule_handle(c.SCHEDULE_ID_PREFIX + schedule_id).delete()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise _unknown(schedule_id) from None
        raise


# -- the worker lifecycle -----------------------------------------------------------------------------


async def sync_declared(
    client: Client, declared: Mapping[str, AgentSchedule], task_queue: str
) -> tuple[list[str], list[str], list[str]]:
    """Brings the namespace's schedules in line with the code: creates, updates, deletes.

    Only schedules declared in code and firing on ``task_queue`` are deleted when the code no longer
    declares them: runtime ones are kept, and another app's (another queue's) are left to it.

    Returns:
        The ids created, updated and deleted.
    """
    created: list[str] = []
    updated: list[str] = []
    for schedule in declared.values():
        (created if await put_declared(client, task_queue, schedule) else updated).append(schedule.id)
    deleted: list[str] = []
    for schedule_id in await _schedule_ids(client):
        if schedule_id in declared:
            continue
        try:
            _, definition, queue = await _describe(client, schedule_id)
            if definition.declared and queue == task_queue:
                await delete_schedule(client, schedule_id)
                deleted.append(schedule_id)
        except ScheduleNotFoundError:
            continue  # another worker starting beside this one deleted it first
    return created, updated, deleted


async def boot_schedules(
    client: Client,
    declared: Mapping[str, AgentSchedule],
    task_queue: str,
    errors: ErrorHook | None = None,
) -> None:
    """:func:`sync_declared` in the background of a worker: reports a failure, never raises.

    The failure goes to the app's ``on_error`` (``errors``), else to the log.
    """
    try:
        created, updated, deleted = await sync_declared(client, declared, task_queue)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        message = error.message if isinstance(error, ChamviError) else f"{type(error).__name__}: {error}"
        line = f"schedules: keeping the app's schedules failed: {message} (the worker goes on)"
        (errors or ErrorHook()).report(
            BackgroundError(line, source="schedules", cause=error), lambda: log.error("%s", line)
        )
        return
    for verb, ids in (("created", created), ("updated", updated), ("deleted (no longer declared)", deleted)):
        if ids:
            log.info("schedules %s: %s", verb, _names(ids))


def _names(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


class Schedules:
    """``client.schedules``: the namespace's agent schedules, created and changed at runtime.

    Args:
        client: a connected Temporal client.
        task_queue: the workers' task queue, where a schedule's runs start.
    """

    def __init__(self, client: Client, task_queue: str) -> None:
        self._client = client
        self._task_queue = task_queue

    async def create(self, agent: str, **options: Unpack[ScheduleOptions]) -> ScheduleView:
        """Creates a Temporal Schedule that runs ``agent`` on this task queue, kept until deleted.

        The options are ``App.schedule``'s (:class:`ScheduleOptions`). The agent is not looked up
        here (no app in this process): ``client.agents.check`` asks a worker; a fire naming an agent
        the workers lack fails.

        Raises:
            InvalidScheduleError: both or neither of cron and every, a bad cron, interval or overlap.
            ConflictError: a schedule with this id exists.
        """
        return await create_schedule(self._client, self._task_queue, define_schedule(agent, **options))

    async def list(self) -> builtins.list[ScheduleView]:
        """Every agent schedule of the namespace, declared in code or created at runtime, by id."""
        return await list_schedules(self._client)

    async def get(self, schedule_id: str) -> ScheduleView:
        """The schedule ``schedule_id``: spec, payload, paused, next and recent fires.

        Raises:
            ScheduleNotFoundError: there is none.
        """
        return await get_schedule(self._client, schedule_id)

    async def pause(self, schedule_id: str, note: str | None = None) -> ScheduleView:
        """Stops a schedule's fires until it is unpaused (a worker's start keeps it paused)."""
        await set_paused(self._client, schedule_id, True, note)
        return await get_schedule(self._client, schedule_id)

    async def unpause(self, schedule_id: str, note: str | None = None) -> ScheduleView:
        """Lets a paused schedule fire again."""
        await set_paused(self._client, schedule_id, False, note)
        return await get_schedule(self._client, schedule_id)

    async def delete(self, schedule_id: str) -> None:
        """Deletes a schedule (a schedule declared in code comes back at the next worker's start)."""
        await delete_schedule(self._client, schedule_id)
