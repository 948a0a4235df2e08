"""``/schedules``: agent schedules (Temporal Schedules whose fires dispatch ordinary runs).

``schedules:read`` lists and shows them; ``schedules:write`` creates, pauses, unpauses and deletes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from pydantic import BaseModel, ConfigDict, Field

from chamvi._constants import NAME_MAX_LENGTH, NAME_PATTERN
from chamvi.client import ChamviClient
from chamvi.http.agents_routes import AgentCheck
from chamvi.http.auth import permission
from chamvi.http.errors import error_responses
from chamvi.http.params import ScheduleId
from chamvi.models import Overlap, ScheduleView
from chamvi.schedules import DEFAULT_MIN_INTERVAL, check_min_interval, define_schedule

EVERY_PATTERN = r"^([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
"""``every``'s form (``chamvi.schedules.parse_every``): whole days, hours, minutes, seconds."""


class CreateSchedule(BaseModel):
    """Body of ``POST /schedules``: the agent, one of ``cron`` and ``every``, and each run's payload.

    ``define_schedule`` enforces exactly one of ``cron`` and ``every`` (and ``timezone`` with a cron
    only), 422 ``invalid_schedule``; the document states it as a ``oneOf``.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["cron"], "not": {"required": ["every"]}},
                {
                    "required": ["every"],
                    "not": {"anyOf": [{"required": ["cron"]}, {"required": ["timezone"]}]},
                },
            ],
            "examples": [
                {"agent": "digest", "cron": "0 8 * * 1-5", "timezone": "Europe/Madrid", "id": "daily-digest"},
                {"agent": "digest", "every": "1h", "payload": {"topic": "releases"}},
            ]
        },
    )

    agent: str = Field(min_length=1, max_length=NAME_MAX_LENGTH, pattern=NAME_PATTERN)
    cron: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Five cron fields, or @daily; one that never fires is 422 `invalid_schedule`",
    )
    every: str | None = Field(
        default=None,
        min_length=2,
        max_length=40,
        pattern=EVERY_PATTERN,
        description="An interval: 90s, 15m, 1h30m, 1d; from the server's minimum interval (a minute unless "
        "configured) to 100 years",
    )
    timezone: str | None = Field(default=None, max_length=100, description="IANA zone of the cron (UTC)")
    payload: Any = Field(default=None, description="Each run's payload (any JSON value)")
    overlap: Overlap = "skip"
    id: str | None = Field(
        default=None,
        max_length=NAME_MAX_LENGTH,
        pattern=NAME_PATTERN,
        description="The schedule's id (by default the agent's name)",
    )


class PauseSchedule(BaseModel):
    """Body of ``POST /schedules/{id}/pause`` and ``/unpause`` (optional): a note the Temporal UI shows."""

    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(default=None, max_length=1000)


class ScheduleList(BaseModel):
    """Answer of ``GET /schedules``: every agent schedule of the namespace, by id."""

    data: list[ScheduleView]


def schedules_router(
    runs: ChamviClient,
    check_agent: AgentCheck | None = None,
    min_interval: timedelta = DEFAULT_MIN_INTERVAL,
) -> APIRouter:
    """The ``/schedules`` routes, through ``runs``'s Temporal client and task queue.

    Args:
        runs: the client that talks to Temporal; schedules fire on its task queue.
        check_agent: refuses a schedule of an agent the workers do not serve, at once (404).
        min_interval: the shortest gap between fires a schedule created here may have (422 under it).
    """
    router = APIRouter(prefix="/schedules", tags=["schedules"])

    @router.get(
        "",
        response_model=ScheduleList,
        responses=error_responses(401, 403),
        openapi_extra=permission("schedules:read"),
        summary="List schedules",
    )
    async def list_schedules() -> ScheduleList:
        """Every agent schedule, declared in code or created here (Temporal's visibility lags a moment)."""
        return ScheduleList(data=await runs.schedules.list())

    @router.post(
        "",
        status_code=201,
        response_model=ScheduleView,
        responses=error_responses(400, 401, 403, 404, 409, 413, 422),
        openapi_extra=permission("schedules:write"),
        summary="Create a schedule",
    )
    async def create_schedule(body: Annotated[CreateSchedule, Body()]) -> ScheduleView:
        """Creates a Temporal Schedule whose fires dispatch runs of `agent`; 409 when the id exists.

        A cron that never fires, an interval over 100 years or fires closer than the server's minimum
        interval (a minute unless configured) answer 422 `invalid_schedule`.
        """
        if check_agent is not None:
            await check_agent(body.agent)
        options = body.model_dump(exclude={"agent"})
        check_min_interval(define_schedule(body.agent, **options), min_interval)
        return await runs.schedules.create(body.agent, **options)

    @router.get(
        "/{schedule_id}",
        response_model=ScheduleView,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission("schedules:read"),
        summary="Show a schedule",
    )
    async def get_schedule(schedule_id: ScheduleId) -> ScheduleView:
        """The schedule: agent, cron or interval, state, next and recent fires."""
        return await runs.schedules.get(schedule_id)

    def add_pause_route(action: str, paused: bool, doc: str) -> None:
        """``pause`` and ``unpause``: one shape, the state they set differs."""

        async def set_state(
            schedule_id: ScheduleId, body: Annotated[PauseSchedule | None, Body()] = None
        ) -> ScheduleView:
            note = body.note if body else None
            if paused:
                return await runs.schedules.pause(schedule_id, note)
            return await runs.schedules.unpause(schedule_id, note)

        router.add_api_route(
            f"/{{schedule_id}}/{action}",
            set_state,
            methods=["POST"],
            name=f"{action}_schedule",
            response_model=ScheduleView,
            responses=error_responses(400, 401, 403, 404, 413, 422),
            openapi_extra=permission("schedules:write"),
            summary=f"{action.capitalize()} a schedule",
            description=doc,
        )

    add_pause_route("pause", True, "Stops the schedule's fires until it is unpaused.")
    add_pause_route("unpause", False, "Lets the schedule fire again.")

    @router.delete(
        "/{schedule_id}",
        status_code=204,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission("schedules:write"),
        summary="Delete a schedule",
    )
    async def delete_schedule(schedule_id: ScheduleId) -> Response:
        """Deletes the schedule; the runs it started go on."""
        await runs.schedules.delete(schedule_id)
        return Response(status_code=204)

    return router
