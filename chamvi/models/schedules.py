"""Agent schedules: what a fire workflow and its activity carry, and what listing a schedule shows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from chamvi.models.runs import RunStatus

Overlap = Literal["skip", "buffer_one", "buffer_all", "allow_all"]
"""What a fire does while the schedule's previous run is still going: skip it, keep one (or all) to
start when it ends, or start anyway. Temporal's ``cancel_other`` / ``terminate_other`` are left out:
they would end the fire workflow and leave its run going, which is not what they promise."""


class ScheduledRunInput(BaseModel):
    """The argument a Temporal Schedule passes its fire workflow (``ChamviScheduledRun``) at each fire.

    It is the schedule's definition too: listing a schedule decodes it from the Schedule's action.
    """

    schedule_id: str
    agent: str
    payload: Any = None
    overlap: Overlap = "skip"
    cron: str | None = None
    """As given: Temporal answers a described Schedule's cron as structured calendars, not the text."""
    every_seconds: float | None = None
    timezone: str | None = None
    declared: bool = False
    """Declared in an app's code (``App.schedule``): the worker lifecycle owns it, deleting it when the
    code no longer declares it; one created at runtime is kept until someone deletes it."""


class ScheduledDispatch(BaseModel):
    """One fire's dispatch: the run's idempotency key is derived from the schedule id and ``fire_time``."""

    schedule_id: str
    agent: str
    payload: Any = None
    fire_time: datetime


class ScheduledRunResult(BaseModel):
    """What a fire workflow ends with: the run it dispatched, and how that run ended when it waited."""

    run_id: str
    created: bool
    """False when this fire had started the run already (a retried or duplicated fire)."""
    status: RunStatus | None = None


class ScheduleView(BaseModel):
    """An agent schedule as its Temporal Schedule describes it (``chamvi schedules list``, the API)."""

    id: str
    agent: str
    cron: str | None = None
    every_seconds: float | None = None
    timezone: str | None = None
    payload: Any = None
    overlap: Overlap = "skip"
    paused: bool = False
    note: str | None = None
    declared: bool = False
    next_fires: list[datetime] = Field(default_factory=list)
    recent_fires: list[datetime] = Field(default_factory=list)
