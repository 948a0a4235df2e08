"""Artifacts over HTTP: a dispatch with files, and reading a run's artifacts back.

``POST /runs`` as multipart form data dispatches with files; ``GET /runs/{run_id}/artifacts`` and
``GET /artifacts/{artifact_id}`` read them back.

The multipart dispatch is a route of its own at ``POST /runs`` that only matches a
``multipart/form-data`` body (:class:`MultipartRoute`), so the JSON dispatch keeps its schema,
validation and answers untouched. Each file is checked against the size limit per attachment as it
arrives (413), before anything is stored.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError as PydanticValidationError
from starlette.datastructures import UploadFile
from starlette.routing import Match
from starlette.types import Scope

from chamvi.artifacts import ArtifactStore, Attachment, check_attachment_size, parse_artifact_id
from chamvi.client import ChamviClient
from chamvi.errors import (
    ChamviValidationError,
    InvalidInputError,
    PermissionDeniedError,
    RunNotFoundError,
    validation_issues,
)
from chamvi.http.agents_routes import AgentCheck
from chamvi.http.auth import Token, permission, principal
from chamvi.http.errors import error_responses
from chamvi.http.params import ArtifactId, RunId
from chamvi.http.runs_routes import dispatch_as
from chamvi.http.schemas import ArtifactList, DispatchResultOut, DispatchRun
from chamvi.models import Artifact
from chamvi.permissions import has_agent_permission, has_permission

DISPATCH_MAX_ATTACHMENTS = 16
"""Files one multipart dispatch may carry; with the limit per file, it bounds the body."""
READ = "artifacts:read"
"""Reads every run's artifacts; ``artifacts:read:<agent>`` the runs of one agent."""
GENERIC_MEDIA_TYPES = frozenset({"", "application/octet-stream"})
"""What clients send when they do not know: the file name says more."""

Principal = Annotated[Token, Depends(principal)]


class MultipartRoute(APIRoute):
    """A route that takes a request only when its body is ``multipart/form-data``."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """No match for any other body, so the route beside it at the same path takes the request."""
        for name, value in scope.get("headers", ()):
            if name == b"content-type" and value.lower().startswith(b"multipart/form-data"):
                return super().matches(scope)
        return Match.NONE, {}


def upload_body_limit(runs: ChamviClient, body_limit: int) -> int:
    """The largest multipart dispatch body: every file at the limit, and the other fields."""
    return DISPATCH_MAX_ATTACHMENTS * runs.attachment_max_bytes + body_limit


def artifacts_router(runs: ChamviClient, check_agent: AgentCheck) -> APIRouter:
    """The multipart dispatch and the artifact routes, through ``runs`` and its artifact store.

    Args:
        runs: the client that stores attachments and starts runs.
        check_agent: refuses an agent the workers do not serve, as the JSON dispatch does.
    """
    router = APIRouter(tags=["artifacts"])

    async def dispatch_with_files(
        request: Request, token: Principal, response: Response
    ) -> DispatchResultOut:
        """A dispatch whose fields are form fields (``payload`` as JSON text).

        Its files are its attachments, stored as the run's first artifacts in the order sent.
        """
        fields, attachments = await _read_form(request, runs.attachment_max_bytes)
        await check_agent(fields.agent)
        return await dispatch_as(runs, fields, token, response, attachments)

    router.add_api_route(
        "/runs",
        dispatch_with_files,
        methods=["POST"],
        route_class_override=MultipartRoute,
        status_code=202,
        response_model=DispatchResultOut,
        include_in_schema=False,  # the JSON dispatch at the same path and method is the documented one
        openapi_extra=permission("runs:dispatch"),
    )

    @router.get(
        "/runs/{run_id}/artifacts",
        response_model=ArtifactList,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission(READ, narrowed=True),
        summary="List a run's artifacts",
    )
    async def list_artifacts(run_id: RunId, token: Principal) -> ArtifactList:
        """Its attachments, then the files its tools put, in order; 404 `run_not_found` for an unknown run.

        `artifacts:read` reads every run's; `artifacts:read:<agent>` the runs of that agent only (an
        unknown run is 403 to such a token, as another agent's run is).
        """
        await check_reader(token, run_id)
        listed = await _store(runs).list(run_id)
        if not listed:
            # a run's artifacts outlive its history (Temporal's retention): only an empty listing asks
            await runs.agent_of(run_id)
        return ArtifactList(data=listed)

    @router.get(
        "/artifacts/{artifact_id}",
        response_class=Response,
        responses={
            200: {"description": "The artifact's bytes, with its media type"},
            **error_responses(401, 403, 404, 422),
        },
        openapi_extra=permission(READ, narrowed=True),
        summary="Download an artifact",
    )
    async def get_artifact(artifact_id: ArtifactId, token: Principal) -> Response:
        """The bytes, with the artifact's media type and file name.

        `artifacts:read` reads every run's; `artifacts:read:<agent>` the runs of that agent only.
        """
        store = _store(runs)
        await check_reader(token, parse_artifact_id(artifact_id)[0])
        info: Artifact = await store.info(artifact_id)
        name = quote(info.filename or info.id)
        return Response(
            await store.read(artifact_id),
            media_type=info.media_type,
            # nosniff: a browser keeps to the stored media type, never guessing HTML or script from the bytes
            headers={
                "Content-Disposition": f"attachment; filename*=UTF-8''{name}",
                "X-Content-Type-Options": "nosniff",
            },
        )

    async def check_reader(token: Token, run_id: str) -> None:
        if has_permission(token.permissions, READ):
            return
        try:
            agent: str | None = await runs.agent_of(run_id)
        except RunNotFoundError:
            agent = None
        if agent is None or not has_agent_permission(token.permissions, READ, agent):
            # the same answer for an unknown run: a narrowed token learns nothing of others' runs
            raise PermissionDeniedError(
                f"token {token.id!r} may read the artifacts of its agents' runs only "
                f"({READ}:<agent>), and this run is not one of them"
            )

    return router


def _store(runs: ChamviClient) -> ArtifactStore:
    if runs.artifacts is None:
        raise InvalidInputError("this API has no artifact store")
    return runs.artifacts


async def _read_form(request: Request, limit: int) -> tuple[DispatchRun, list[Attachment]]:
    """The dispatch's fields and files, each file refused over ``limit`` before it is read."""
    form = await request.form(max_files=DISPATCH_MAX_ATTACHMENTS, max_fields=len(DispatchRun.model_fields))
    fields: dict[str, Any] = {}
    attachments: list[Attachment] = []
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            # the parser spooled the file and counted it: refused before it is read into memory
            check_attachment_size(value.filename, value.size or 0, limit)
            attachments.append(Attachment(await value.read(), value.filename, _media_type(value)))
        else:
            fields[name] = value
    if "payload" in fields:
        try:
            fields["payload"] = json.loads(fields["payload"])
        except ValueError as error:
            raise InvalidInputError(f"form field 'payload' is not JSON: {error}") from None
    try:
        return DispatchRun.model_validate(fields), attachments
    except PydanticValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        issues = validation_issues(error.errors(include_input=False))
        raise ChamviValidationError(f"invalid dispatch form: {problems}", issues=issues) from None


def _media_type(upload: UploadFile) -> str | None:
    kind = (upload.content_type or "").lower()
    return None if kind in GENERIC_MEDIA_TYPES else kind
