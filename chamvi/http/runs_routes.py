"""``/runs``: dispatch, list, show, approve and cancel runs.

The token's principal is the run's invoker (so an idempotency key is scoped to it) and the approver
of the approvals it answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Response

from chamvi.agents import validate_agent_name
from chamvi.client import ChamviClient
from chamvi.errors import AgentNotFoundError, InvalidAgentDefinitionError, InvalidInputError, UnavailableError
from chamvi.http.auth import Token, permission, principal
from chamvi.http.errors import error_responses
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

TRIGGER = "http"
APPROVE_TIMEOUT_SECONDS = 30.0
"""An approval is an update the run's worker answers; without a worker it would wait forever."""

RunId = Annotated[str, Path(min_length=1, max_length=1000, description="The run id dispatch answered")]
Principal = Annotated[Token, Depends(principal)]


def runs_router(runs: ChamviClient, agents: Collection[str] | None = None) -> APIRouter:
    """The ``/runs`` routes: dispatch, list, show, approve and cancel runs through ``runs``.

    Args:
        runs: the client that talks to Temporal.
        agents: the agents the workers serve; a dispatch naming another answers 404 at once (without
            it, such a run is accepted and fails in the worker).
    """
    router = APIRouter(prefix="/runs", tags=["runs"])
    known = sorted(agents) if agents is not None else None

    def check_agent(name: str) -> None:
        try:
            validate_agent_name(name)
        except InvalidAgentDefinitionError as error:
            raise InvalidInputError(error.message) from None
        if known is not None and name not in known:
            served = ", ".join(repr(a) for a in known) or "none"
            raise AgentNotFoundError(f"unknown agent {name!r}: this app serves {served}")

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
        """
        check_agent(body.agent)
        result = await runs.dispatch(
            body.agent,
            body.payload,
            trigger=TRIGGER,
            channel=body.channel,
            address=body.address,
            invoker=token.invoker(),
            idempotency_key=body.idempotency_key,
            concurrency_key=body.concurrency_key,
        )
        if not result.created:
            response.status_code = 200
        return DispatchResultOut(run_id=result.run_id, created=result.created)

    @router.get(
        "",
        response_model=RunList,
        responses=error_responses(401, 403, 422),
        openapi_extra=permission("runs:read"),
        summary="List runs",
    )
    async def list_runs(
        agent: Annotated[str | None, Query(max_length=255)] = None,
        status: Annotated[RunStatus | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
        channel: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    ) -> RunList:
        """The most recent runs first, from Temporal's visibility (no worker needed)."""
        if agent is not None:
            try:
                validate_agent_name(agent)
            except InvalidAgentDefinitionError as error:
                raise InvalidInputError(error.message) from None
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
        try:
            answered = await asyncio.wait_for(
                runs.approve(
                    run_id,
                    approved=body.approved,
                    reason=body.reason,
                    approval_id=body.approval_id,
                    approver=token.invoker(),
                ),
                timeout=APPROVE_TIMEOUT_SECONDS,
            )
        except TimeoutError:
            raise UnavailableError(
                f"run {run_id!r} did not take the answer within {APPROVE_TIMEOUT_SECONDS:g} s: "
                "is a worker running? Try again"
            ) from None
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
