"""Schedule definitions: every bad input is refused before Temporal sees it, naming the problem."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chamvi import App, define_agent
from chamvi.errors import AgentNotFoundError, InvalidScheduleError
from chamvi.models import ScheduledDispatch
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from chamvi.schedules import (
    check_min_interval,
    define_schedule,
    parse_every,
    scheduled_run_input,
    shortest_gap,
    validate_cron,
)


def app() -> App:
    models = ModelRegistry()
    models.register("scripted/x", ScriptedModel([reply("x")]))
    return App(agents=[define_agent(name="digest", model="scripted/x", instructions="x")], models=models)


def test_a_schedule_needs_exactly_one_of_cron_and_every() -> None:
    with pytest.raises(InvalidScheduleError, match="exactly one of cron= and every=, not both"):
        define_schedule("digest", cron="@daily", every="1h")
    with pytest.raises(InvalidScheduleError, match="not neither"):
        define_schedule("digest")


@pytest.mark.parametrize(
    ("cron", "problem"),
    [
        ("0 8 * *", "has 4 fields"),
        ("61 8 * * *", "minute '61' is out of range 0-59"),
        ("0 24 * * *", "hour '24' is out of range 0-23"),
        ("0 8 0 * *", "day of month '0' is out of range 1-31"),
        ("0 8 * foo *", "month 'foo' is out of range 1-12"),
        ("0 8 * * 1-", "day of week '1-' is not valid"),
        ("0 8 * * 5-1", "range '5-1' runs backwards"),
        ("*/0 * * * *", "has a step of 0"),
        ("@fortnightly", "not a known shortcut"),
        ("  ", "is empty"),
    ],
)
def test_a_bad_cron_is_refused_naming_the_field(cron: str, problem: str) -> None:
    with pytest.raises(InvalidScheduleError, match=problem):
        validate_cron(cron)


@pytest.mark.parametrize(
    "cron", ["0 8 * * *", "*/15 9-17 * * mon-fri", "0 0 1 jan,jul *", "@daily", "5 4 * * 7"]
)
def test_good_crons_pass(cron: str) -> None:
    assert validate_cron(cron) == cron


def test_intervals_read_as_text_or_timedelta() -> None:
    assert parse_every("1h30m") == timedelta(hours=1, minutes=30)
    assert parse_every("1d") == timedelta(days=1)
    assert parse_every(timedelta(seconds=5)) == timedelta(seconds=5)
    for bad, problem in (
        ("soon", "not an interval"),
        ("0s", "at least 1 s"),
        (timedelta(milliseconds=1500), "whole"),
    ):
        with pytest.raises(InvalidScheduleError, match=problem):
            parse_every(bad)


def test_an_unknown_overlap_timezone_or_id_is_refused() -> None:
    with pytest.raises(InvalidScheduleError, match="overlap 'cancel_other' is unknown: use one of skip"):
        define_schedule("digest", every="1h", overlap="cancel_other")
    with pytest.raises(InvalidScheduleError, match="timezone 'Mars/Olympus' is unknown"):
        define_schedule("digest", cron="@daily", timezone="Mars/Olympus")
    with pytest.raises(InvalidScheduleError, match="timezone= applies to cron= only"):
        define_schedule("digest", every="1h", timezone="UTC")
    with pytest.raises(InvalidScheduleError, match="schedule id 'Daily Digest' is invalid"):
        define_schedule("digest", every="1h", id="Daily Digest")
    with pytest.raises(InvalidScheduleError, match="payload is not JSON"):
        define_schedule("digest", every="1h", payload={"when": datetime.now(UTC)})


def test_app_schedule_refuses_an_unknown_agent_and_a_repeated_id() -> None:
    served = app()
    with pytest.raises(AgentNotFoundError, match="unknown agent 'digset': this app serves 'digest'"):
        served.schedule("digset", cron="@daily")
    served.schedule("digest", cron="@daily")
    with pytest.raises(InvalidScheduleError, match="two schedules have the id 'digest'"):
        served.schedule("digest", every="1h")
    assert list(served.schedules) == ["digest"]


def test_a_fire_keys_its_run_by_schedule_and_fire_time_whatever_the_zone() -> None:
    at = datetime(2026, 3, 1, 8, tzinfo=UTC)
    madrid = at.astimezone(datetime.fromisoformat("2026-03-01T09:00:00+01:00").tzinfo)
    one = scheduled_run_input(ScheduledDispatch(schedule_id="daily", agent="digest", fire_time=at))
    same = scheduled_run_input(ScheduledDispatch(schedule_id="daily", agent="digest", fire_time=madrid))
    later = scheduled_run_input(
        ScheduledDispatch(schedule_id="daily", agent="digest", fire_time=at + timedelta(days=1))
    )
    assert one.idempotency_key == same.idempotency_key == "daily@2026-03-01T08:00:00+00:00"
    assert later.idempotency_key != one.idempotency_key
    assert one.trigger == "schedule" and one.invoker is not None and one.invoker.id == "daily"


def test_a_misspelt_option_is_named() -> None:
    options: dict = {"every": "1h", "crn": "@daily"}
    with pytest.raises(InvalidScheduleError, match=r"unknown schedule option\(s\) crn: use cron, every"):
        define_schedule("digest", **options)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"every": "99999999999d"}, "longer than 100 years"),
        ({"every": "9" * 5000 + "s"}, "longer than 100 years"),
        ({"every": "36501d"}, "longer than 100 years"),
        ({"every": timedelta(days=999_999_999)}, "longer than 100 years"),
        ({"cron": "0 0 31 2 *"}, "never fires"),
        ({"cron": "0 0 30 2 *"}, "never fires"),
        ({"cron": "0 0 31 4,6,9,11 *"}, "never fires"),
        ({"cron": "0 0 31 2 1"}, "never fires"),
        ({"cron": "0 0 */40 2 *"}, None),  # the 1st
        ({"cron": "0 0 29 2 *"}, None),  # leap years
        ({"cron": "0 0 13 * fri"}, None),  # Friday the 13th: both must match, and some day does
        ({"cron": "0 0 31 * *"}, None),
        ({"every": "36500d"}, None),
    ],
)
def test_a_schedule_that_overflows_or_never_fires_is_refused(options: dict, problem: str | None) -> None:
    if problem is None:
        define_schedule("digest", **options)
        return
    with pytest.raises(InvalidScheduleError, match=problem):
        define_schedule("digest", **options)


@pytest.mark.parametrize(
    ("options", "gap"),
    [
        ({"every": "90s"}, timedelta(seconds=90)),
        ({"cron": "* * * * *"}, timedelta(minutes=1)),
        ({"cron": "*/15 8-17 * * 1-5"}, timedelta(minutes=15)),
        ({"cron": "0,59 0 * * *"}, timedelta(minutes=59)),
        ({"cron": "30 23 * * *"}, timedelta(days=1)),
        ({"cron": "0 0,23 * * *"}, timedelta(hours=1)),  # 23:00, then 00:00 the next day
        ({"cron": "@hourly"}, timedelta(hours=1)),
        ({"cron": "@daily"}, timedelta(days=1)),
    ],
)
def test_the_shortest_gap_between_fires_is_read_off_the_spec(options: dict, gap: timedelta) -> None:
    assert shortest_gap(define_schedule("digest", **options)) == gap


def test_a_schedule_firing_more_often_than_the_minimum_interval_is_refused() -> None:
    with pytest.raises(InvalidScheduleError, match="every 1 s is more often than once every 1 min"):
        check_min_interval(define_schedule("digest", every="1s"), timedelta(minutes=1))
    often = r"fires as often as every 1 min.*CHAMVI_SCHEDULE_MIN_INTERVAL"
    with pytest.raises(InvalidScheduleError, match=often):
        check_min_interval(define_schedule("digest", cron="* * * * *"), timedelta(minutes=5))
    check_min_interval(define_schedule("digest", every="5m"), timedelta(minutes=5))
