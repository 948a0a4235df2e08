"""``/runs``: dispatch, list, show, approve and cancel runs.

The token's principal is the run's invoker (so an idempotency key is scoped to it) and the approver
of the approvals it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Annotated, TypeVar

from fastapi import APIRouter, Body, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse

from chamvi._constants import NAME_MAX_LENGTH, NAME_PATTERN
from chamvi.artifacts import Attachment
from chamvi.client import ChamviClient
from chamvi.errors import UnavailableError
from chamvi.http.agents_routes import AgentCheck, agent_check
from chamvi.http.auth import QUERY_TOKEN_KEY, Token, permission, principal
from chamvi.http.errors import error_responses
from chamvi.http.params import RunId
from chamvi.http.schemas import (
    ApprovalOut,
    ApproveRun,
    CancelOut,
    DispatchResultOut,
    DispatchRun,
    RunList,
    RunListMeta,
)
from chamvi.models import RunStatus, RunView
from chamvi.run_events import RUN_DELTA, DeltaOrder, EventHub, RunEvent, parse_event_id

T = TypeVar("T")

TRIGGER = "http"
APPROVE_TIMEOUT_SECONDS = 30.0
"""An approval is an update the run's worker answers; without a worker it would wait forever."""

SSE_MEDIA_TYPE = "text/event-stream"
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""No cache may keep a stream, and no proxy may buffer it (nginx honours ``X-Accel-Buffering``)."""
EVENT_ID_PATTERN = r"^[0-9]*$"
"""The ``id`` of a run's event, as the stream sent it; empty is none."""
KEEPALIVE_SECONDS = 15.0
"""A comment line this often while nothing happens, so proxies do not close an idle stream."""

Principal = Annotated[Token, Depends(principal)]


async def dispatch_as(
    runs: ChamviClient,
    body: DispatchRun,
    token: Token,
    response: Response,
    attachments: Sequence[Attachment] = (),
) -> DispatchResultOut:
    """Dispatches ``body`` for the token's principal: 202 for a new run, 200 for a redelivery."""
    result = await runs.dispatch(
        body.agent,
        body.payload,
        trigger=TRIGGER,
        channel=body.channel,
        address=body.address,
        invoker=token.invoker(),
        idempotency_key=body.idempotency_key,
        concurrency_key=body.concurrency_key,
        attachments=attachments,
        model_settings=body.model_settings,
    )
    if not result.created:
        response.status_code = 200
    return DispatchResultOut(run_id=result.run_id, created=result.created)


async def answer_in_time(answering: Awaitable[T], whose: str) -> T:
    """``answering`` (an approval's update), or 503 once a worker has not taken it in 30 s.

    Raises:
        UnavailableError: no worker took the answer in time; ``whose`` names the run in the message.
    """
    try:
        return await asyncio.wait_for(answering, timeout=APPROVE_TIMEOUT_SECONDS)
    except TimeoutError:
        raise UnavailableError(
            f"{whose} did not take the answer within {APPROVE_TIMEOUT_SECONDS:g} s: "
            "is a worker running? Try again"
        ) from None


def runs_router(
    runs: ChamviClient, check_agent: AgentCheck | None = None, hub: EventHub | None = None
) -> APIRouter:
    """The ``/runs`` routes: dispatch, list, show, follow, approve and cancel runs through ``runs``.

    Args:
        runs: the client that talks to Temporal.
        check_agent: refuses a dispatch of an agent the workers do not serve, at once (404); by
            default only a malformed name is refused, and a run of an unknown agent fails in the worker
            (``chamvi.http.agents_routes.agent_check``).
        hub: the events of this process (the app's); with a worker in the same process (``chamvi
            dev``) the event stream carries the model's deltas too.
    """
    router = APIRouter(prefix="/runs", tags=["runs"])
    check_agent = check_agent or agent_check(None)

    @router.post(
        "",
        status_code=202,
        response_model=DispatchResultOut,
        responses={
            200: {"model": DispatchResultOut, "description": "A redelivery: the run this key started"},
            **error_responses(400, 401, 403, 404, 413, 422),
        },
        openapi_extra=permission("runs:dispatch"),
        summary="Dispatch a run",
    )
    async def dispatch_run(
        body: Annotated[DispatchRun, Body()], token: Principal, response: Response
    ) -> DispatchResultOut:
        """Starts a run of `agent` with `payload`; 202 with its id.

        With an `idempotency_key` seen before from the same token, 200 with the existing run instead.
        `model_settings` may set only what the agent lets a dispatch set (its `dispatch_settings`; by
        default temperature, top_p, stop, seed), within its caps: anything else is a 422
        `validation_error` with an issue at `model_settings.<field>`, and no run starts.
        """
        await check_agent(body.agent)
        return await dispatch_as(runs, body, token, response)

    @router.get(
        "",
        response_model=RunList,
        responses=error_responses(401, 403, 422),
        openapi_extra=permission("runs:read"),
        summary="List runs",
    )
    async def list_runs(
        agent: Annotated[str | None, Query(max_length=NAME_MAX_LENGTH, pattern=NAME_PATTERN)] = None,
        status: Annotated[RunStatus | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
        channel: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    ) -> RunList:
        """The most recent runs first, from Temporal's visibility (no worker needed)."""
        found = await runs.list_runs(
            agent=agent, status=status.value if status else None, limit=offset + limit, channel=channel
        )
        return RunList(data=found[offset:], meta=RunListMeta(limit=limit, offset=offset))

    @router.get(
        "/{run_id}",
        response_model=RunView,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission("runs:read"),
        summary="Show a run",
    )
    async def get_run(run_id: RunId) -> RunView:
        """Status, steps, usage, output, error, what it waits for, and its taint."""
        return await runs.get_run(run_id)

    @router.get(
        "/{run_id}/events",
        response_class=StreamingResponse,
        responses={
            200: {"content": {SSE_MEDIA_TYPE: {}}, "description": "The run's events, until it ends"},
            204: {"description": "The run has ended and has no event after `Last-Event-ID`"},
            **error_responses(401, 403, 404, 422),
        },
        openapi_extra={**permission("runs:read"), QUERY_TOKEN_KEY: True},
        summary="Follow a run's events",
    )
    async def run_events(
        run_id: RunId,
        # a header is text or absent: empty is none, so the document offers no null to send
        last_event_id: Annotated[
            str, Header(alias="Last-Event-ID", max_length=40, pattern=EVENT_ID_PATTERN)
        ] = "",
        resume_after: Annotated[
            str | None,
            Query(
                alias="last_event_id",
                max_length=40,
                pattern=EVENT_ID_PATTERN,
                description="As `Last-Event-ID`, for a new EventSource (a reloaded page); the header wins",
            ),
        ] = None,
    ) -> Response:
        """The run's events as Server-Sent Events, until the run ends.

        Each is `id: <event id>`, `event: <type>`, `data: <JSON>`. Reconnect with `Last-Event-ID`
        (or `?last_event_id=`) to resume after that event, without gaps or repeats. Deltas
        (`run.delta`) carry no id: they are not stored. The token may come as `?token=` for a
        browser's `EventSource`, which cannot send headers.
        """
        after = parse_event_id(last_event_id or resume_after)
        if not await runs.is_open(run_id):
            # an ended run's history is complete: read it at once, and tell a browser that
            # reconnects after the last event to stop (204), rather than reconnect forever
            ended = [event async for event in runs.events(run_id, after)]
            if not ended:
                return Response(status_code=204)
            return StreamingResponse(_sse_lines(ended), media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS)
        return StreamingResponse(
            _follow(runs, hub, run_id, after), media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS
        )

    @router.post(
        "/{run_id}/approve",
        response_model=ApprovalOut,
        responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
        openapi_extra=permission("runs:approve"),
        summary="Answer the approval a run waits on",
    )
    async def approve_run(
        run_id: RunId, body: Annotated[ApproveRun, Body()], token: Principal
    ) -> ApprovalOut:
        """Approves or denies `approval_id`; the token's principal is recorded as the approver.

        An id the run is not waiting on (stale, unknown or answered) is 409.
        """
        answered = await answer_in_time(
            runs.approvals.approve(
                run_id,
                approved=body.approved,
                reason=body.reason,
                approval_id=body.approval_id,
                approver=token.invoker(),
            ),
            f"run {run_id!r}",
        )
        return ApprovalOut(run_id=run_id, approval_id=answered, approved=body.approved)

    @router.post(
        "/{run_id}/cancel",
        status_code=202,
        response_model=CancelOut,
        responses=error_responses(401, 403, 404, 409, 422),
        openapi_extra=permission("runs:cancel"),
        summary="Cancel a run",
    )
    async def cancel_run(run_id: RunId) -> CancelOut:
        """Requests cancellation: the run settles `cancelled`. A run that has ended is 409."""
        await runs.cancel(run_id)
        return CancelOut(run_id=run_id)

    return router


def sse_message(event: RunEvent) -> str:
    """One event in the Server-Sent Events format; a delta has no ``id`` so a reconnect skips none."""
    data = json.dumps(event.as_dict(), default=str, separators=(",", ":"))
    head = f"id: {event.event_id}\n" if event.event_id is not None else ""
    return f"{head}event: {event.type}\ndata: {data}\n\n"


async def _sse_lines(events: list[RunEvent]) -> AsyncIterator[str]:
    for event in events:
        yield sse_message(event)


async def _follow(
    runs: ChamviClient, hub: EventHub | None, run_id: str, after: int | None
) -> AsyncIterator[str]:
    """The run's events as Server-Sent Events, with a comment line while nothing happens."""
    async for event in follow_events(runs, hub, run_id, after):
        yield sse_message(event) if event is not None else ": keep-alive\n\n"


async def follow_events(
    runs: ChamviClient, hub: EventHub | None, run_id: str, after: int | None
) -> AsyncIterator[RunEvent | None]:
    """The run's history events merged with this process's deltas, until the run ends.

    None stands for ``KEEPALIVE_SECONDS`` without an event. When the reader goes away the generator
    is closed, which cancels the history long-poll and forgets the delta queue: a closed stream
    holds nothing on the server.
    """
    watching: contextlib.AbstractContextManager[asyncio.Queue[RunEvent]] = (
        hub.watching(run_id) if hub is not None else contextlib.nullcontext(asyncio.Queue())
    )
    with watching as queue:
        done: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        order = DeltaOrder()

        async def pump() -> None:
            # from the start, even when resuming: the events before `after` place the deltas
            try:
                async for event in runs.events(run_id):
                    await done.put(event)
            finally:
                await done.put(None)

        pumping = asyncio.create_task(pump())
        try:
            while True:
                history = asyncio.ensure_future(done.get())
                delta = asyncio.ensure_future(queue.get())
                finished, _ = await asyncio.wait(
                    {history, delta}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                for waiting in (history, delta):
                    if waiting not in finished:
                        waiting.cancel()
                if delta in finished and delta.result().type == RUN_DELTA:
                    for event in order.delta(delta.result()):
                        yield event
                if history in finished:
                    ended = history.result()
                    if ended is None:
                        pumping.result()  # raises what ended the history, if it failed
                        return
                    if after is None or (ended.event_id or 0) > after:
                        yield ended
                    for event in order.seen(ended):
                        yield event
                if not finished:
                    yield None
        finally:
            pumping.cancel()
            with contextlib.suppress(BaseException):
                await pumping
