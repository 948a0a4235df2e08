"""Cron expressions as Temporal reads them: checked, expanded, and whether and how often they fire.

Temporal matches a time when every field matches, the day of month and the day of week included
(classic cron fires when either matches): ``0 0 31 2 1`` never fires there, ``0 0 13 * fri`` fires on
Friday the 13th only.
"""

from __future__ import annotations

import calendar
import itertools
import re
from dataclasses import dataclass
from datetime import timedelta

from chamvi.errors import InvalidScheduleError

CRON_SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...], int], ...] = (
    # name, lowest, highest, names, value of the first name
    ("minute", 0, 59, (), 0),
    ("hour", 0, 23, (), 0),
    ("day of month", 1, 31, (), 0),
    ("month", 1, 12, _MONTHS, 1),
    ("day of week", 0, 7, _DAYS, 0),  # 0 and 7 are both Sunday, as in cron
)
_ITEM = re.compile(r"^(?P<range>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>\d+))?$")
HELP = "use five fields 'minute hour day-of-month month day-of-week' such as '0 8 * * 1-5', or @daily"
_CYCLE_YEARS = range(2000, 2028)
"""28 years from a leap year: every date falls on every weekday it ever can (Gregorian, 1901-2099)."""


@dataclass(frozen=True)
class CronFields:
    """The values each field of a cron expression matches."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 is Sunday (7 is read as 0)."""


def _value(field: str, text: str, low: int, high: int, names: tuple[str, ...], first: int) -> int:
    if text in names:
        return names.index(text) + first
    if not text.isdigit() or not low <= int(text) <= high:
        raise InvalidScheduleError(f"cron {field} {text!r} is out of range {low}-{high}: {HELP}")
    return int(text)


def parse_cron(cron: str) -> CronFields:
    """The fields of a cron expression (or a shortcut such as ``@daily``), once it is valid and fires.

    Raises:
        InvalidScheduleError: not five valid fields nor a shortcut, or no day ever matches.
    """
    if not isinstance(cron, str) or not cron.strip():
        raise InvalidScheduleError(f"cron {cron!r} is empty: {HELP}")
    text = cron.strip().lower()
    if text.startswith("@"):
        if text not in CRON_SHORTCUTS:
            raise InvalidScheduleError(
                f"cron {cron!r} is not a known shortcut: use one of {', '.join(sorted(CRON_SHORTCUTS))}"
            )
        text = CRON_SHORTCUTS[text]
    fields = text.split()
    if len(fields) != len(_FIELDS):
        raise InvalidScheduleError(f"cron {cron!r} has {len(fields)} fields: {HELP}")
    values = [_field(cron, value, *spec) for value, spec in zip(fields, _FIELDS, strict=True)]
    parsed = CronFields(values[0], values[1], values[2], values[3], frozenset(day % 7 for day in values[4]))
    if not _some_day(parsed):
        both = len(parsed.weekdays) < 7
        weekdays = " on those days of the week (Temporal needs both to match)" if both else ""
        raise InvalidScheduleError(
            f"cron {cron!r} never fires: no date has that day of month in those months{weekdays}"
        )
    return parsed


def _field(
    cron: str, value: str, field: str, low: int, high: int, names: tuple[str, ...], first: int
) -> frozenset[int]:
    matched: set[int] = set()
    for item in value.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise InvalidScheduleError(f"cron {cron!r}: {field} {item!r} is not valid: {HELP}")
        step = int(match["step"]) if match["step"] is not None else 1
        if step < 1:
            raise InvalidScheduleError(f"cron {cron!r}: {field} {item!r} has a step of 0")
        if match["range"] == "*":
            start, end = low, high
        else:
            bounds = [_value(field, part, low, high, names, first) for part in match["range"].split("-")]
            if len(bounds) == 2 and bounds[0] > bounds[1]:
                raise InvalidScheduleError(f"cron {cron!r}: {field} range {item!r} runs backwards")
            # ``5/15``: from 5 to the end, as cron reads a start with a step
            start, end = bounds[0], bounds[-1] if len(bounds) == 2 or match["step"] is None else high
        matched.update(range(start, end + 1, step))
    return frozenset(matched)


def _some_day(fields: CronFields) -> bool:
    for year in _CYCLE_YEARS:
        for month in fields.months:
            first_weekday, length = calendar.monthrange(year, month)  # Monday is 0
            for day in fields.days:
                if day <= length and (first_weekday + day) % 7 in fields.weekdays:
                    return True  # (Monday 0 + day 1) % 7 == 1, cron's Monday
    return False


def shortest_cron_gap(fields: CronFields) -> timedelta:
    """The shortest time between two fires: within a day, or from a day's last to the next day's first."""
    times = sorted(hour * 60 + minute for hour in fields.hours for minute in fields.minutes)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    gaps.append(times[0] + 24 * 60 - times[-1])
    return timedelta(minutes=min(gaps))
