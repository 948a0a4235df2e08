"""``/approvals``: one approval answered by its token (``chamvi.approval_tokens``), no run id needed.

The token is the permission (a capability, as the link in a chat message is meant to be), so these
routes declare none and the bearer middleware lets them through. A caller may still send its bearer
token: then it is the approver the run records, else ``token holder``; an unknown bearer token is
refused (401) rather than silently dropped.

The token travels in the JSON body, never in the path or the query, so it stays out of the access
log, of proxies' logs and of ``Referer`` headers; the approvals page reads it from the link's
fragment, which browsers never send.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request

from chamvi.approval_tokens import TOKEN_HOLDER, PendingApproval
from chamvi.client import ChamviClient
from chamvi.http.auth import Authenticator, Token, bearer_credentials
from chamvi.http.errors import error_responses
from chamvi.http.runs_routes import answer_in_time
from chamvi.http.schemas import AnswerByToken, ApprovalOut, ApprovalToken, ErrorBody
from chamvi.models import ApprovalDecision, Invoker

_TOKEN_ERRORS: dict[int | str, dict[str, Any]] = {
    **error_responses(400, 401, 413, 422, 503),
    403: {"model": ErrorBody, "description": "`approval_token_invalid`: not a token chamvi signed"},
    409: {
        "model": ErrorBody,
        "description": "`approval_not_pending`: used, answered otherwise, timed out, or the run ended",
    },
    410: {"model": ErrorBody, "description": "`approval_token_expired`: past the approval's deadline"},
}
_CAPABILITY = {"x-capability": "approval token (in the body)"}


def approvals_router(runs: ChamviClient, tokens: Sequence[Token]) -> APIRouter:
    """The routes that take an approval token: see what it answers, and answer it.

    Args:
        runs: the client, with the workers' ``approval_tokens``.
        tokens: the API's bearer tokens, to record a caller who sends one as the approver.
    """
    router = APIRouter(prefix="/approvals", tags=["approvals"])
    authenticator = Authenticator(tokens)

    def approver(request: Request) -> Invoker:
        credentials = bearer_credentials(request.scope)
        if credentials is None:
            return TOKEN_HOLDER
        token = authenticator.authenticate(credentials)
        if token is None:
            raise HTTPException(
                401,
                "unknown bearer token: send none to answer as the token's holder",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return token.invoker()

    @router.post(
        "/view",
        response_model=PendingApproval,
        responses=_TOKEN_ERRORS,
        openapi_extra=_CAPABILITY,
        summary="Show the approval a token answers",
    )
    async def view_approval(body: Annotated[ApprovalToken, Body()]) -> PendingApproval:
        """What waits, until when: the request's title and body when its channel message carried them.

        Never the call's arguments: those are in `GET /runs/{run_id}` for tokens with `runs:read`.
        """
        return await runs.approvals.pending(body.token)

    @router.post(
        "/answer",
        response_model=ApprovalOut,
        responses=_TOKEN_ERRORS,
        openapi_extra=_CAPABILITY,
        summary="Answer an approval by its token",
    )
    async def answer_approval(body: Annotated[AnswerByToken, Body()], request: Request) -> ApprovalOut:
        """Approves or denies the approval the token names, once: a second answer is 409.

        The caller's bearer token, if it sends one, is recorded as the approver; else `token holder`.
        """
        decision = ApprovalDecision(approved=body.approved, reason=body.reason, approver=approver(request))
        answered = await answer_in_time(runs.approvals.resume(body.token, decision), "the run")
        return ApprovalOut(run_id=answered.run_id, approval_id=answered.approval_id, approved=body.approved)

    return router
