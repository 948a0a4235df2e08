"""``/agents``: the agents the workers serve, agents defined at runtime (put and removed as data), skills.

``agents:read`` for ``GET``, ``agents:write`` for ``PUT`` and ``DELETE``. The routes work over an
:class:`AgentDirectory`: the API's own view of the revision store (``chamvi.dynamic_agents``, over
the artifact store every process shares), or, without one, the workers (``ChamviClient``'s
``AgentRegistry`` workflow). Either way a put is checked against the App's runtime tools and models.
``GET /agents/{name}/skills`` answers an agent's skills from a :class:`SkillLibrary` (a worker's in
``chamvi dev``, the API's own over the shared artifact store otherwise).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Body, Depends, Query, Response
from pydantic import BaseModel, WithJsonSchema

from chamvi._names import validate_agent_name
from chamvi.client import ChamviClient
from chamvi.errors import (
    AgentNotFoundError,
    ChamviValidationError,
    InvalidAgentDefinitionError,
    InvalidInputError,
)
from chamvi.http.auth import AGENTS_READ, AGENTS_WRITE, Token, permission, principal
from chamvi.http.errors import error_responses
from chamvi.http.params import AgentName
from chamvi.models import AgentDefinition, AgentInfo, AgentPutResult, Invoker
from chamvi.models.skills import AgentSkills
from chamvi.skills.library import SkillLibrary

READ = AGENTS_READ
WRITE = AGENTS_WRITE

Principal = Annotated[Token, Depends(principal)]
_EXAMPLE = {
    "description": "Labels incoming issues.",
    "instructions": "Label the issue in the trigger payload as bug, feature or question.",
    "tools": [],
    "budget": {"max_steps": 5},
}


class AgentDirectory(Protocol):
    """What the ``/agents`` routes and the dispatch check need: ``RuntimeAgents`` or the workers."""

    async def put_agent(
        self, name: str, definition: Mapping[str, Any] | AgentDefinition, *, by: Invoker | None = None
    ) -> AgentPutResult:
        """Puts ``name``'s next revision."""
        ...

    async def remove_agent(self, name: str, *, by: Invoker | None = None) -> int:
        """Removes a runtime agent; answers the revision that removed it."""
        ...

    async def get_agent(self, name: str, revision: int | None = None) -> AgentInfo:
        """An agent, with a runtime agent's definition."""
        ...

    async def list_agents(self) -> list[AgentInfo]:
        """Every agent new runs may start."""
        ...

    async def check(self, name: str) -> None:
        """Refuses (``AgentNotFoundError``) a name new runs cannot start."""
        ...


class ThroughWorkers:
    """An :class:`AgentDirectory` that asks the workers (an API without the revision store).

    Args:
        runs: the client whose task queue the workers poll.
    """

    def __init__(self, runs: ChamviClient) -> None:
        self.runs = runs

    async def put_agent(
        self, name: str, definition: Mapping[str, Any] | AgentDefinition, *, by: Invoker | None = None
    ) -> AgentPutResult:
        """``ChamviClient.agents.put``."""
        return await self.runs.agents.put(name, definition, by=by)

    async def remove_agent(self, name: str, *, by: Invoker | None = None) -> int:
        """``ChamviClient.agents.remove``."""
        return await self.runs.agents.remove(name, by=by)

    async def get_agent(self, name: str, revision: int | None = None) -> AgentInfo:
        """``ChamviClient.agents.get``."""
        return await self.runs.agents.get(name, revision)

    async def list_agents(self) -> list[AgentInfo]:
        """``ChamviClient.agents.list``."""
        return await self.runs.agents.list()

    async def check(self, name: str) -> None:
        """A worker's answer; with none answering, the run is let through (it waits in the queue)."""
        await self.runs.agents.check(name)


AgentCheck = Callable[[str], Awaitable[None]]
"""Refuses, before a run starts, an agent name the workers cannot run (raises, else returns)."""


def agent_check(agents: Collection[str] | None, directory: AgentDirectory | None = None) -> AgentCheck:
    """The dispatch check: a malformed name is refused; one the workers do not serve, when known.

    An agent of ``agents`` (the App's, in code) passes at once; another is asked of ``directory``
    (runtime agents); without a directory, it is refused.

    Raises (from the check):
        InvalidInputError: a malformed name.
        AgentNotFoundError: an agent neither in code nor (through ``directory``) put at runtime.
    """
    known = sorted(agents) if agents is not None else None

    async def check(name: str) -> None:
        try:
            validate_agent_name(name)
        except InvalidAgentDefinitionError as error:
            raise InvalidInputError(error.message) from None
        if known is None or name in known:
            return
        if directory is not None:
            await directory.check(name)
            return
        served = ", ".join(repr(a) for a in known) or "none"
        raise AgentNotFoundError(f"unknown agent {name!r}: this app serves {served}")

    return check


_INSTRUCTIONS_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "role": {"enum": ["system", "user", "assistant"]},
                    "content": {"type": "string", "minLength": 1},
                },
                "required": ["role", "content"],
                "additionalProperties": False,
            },
        },
    ],
    "description": "Text (one system message), or system/user/assistant text messages in order",
}


class AgentBody(AgentDefinition):
    """Body of ``PUT /agents/{name}``: an :class:`~chamvi.models.agents.AgentDefinition`.

    Its ``instructions`` are checked with the rest of the definition by the put, so a problem in
    them is at its place (``body.instructions.0.role``), as every other field's is.
    """

    instructions: Annotated[Any, WithJsonSchema(_INSTRUCTIONS_SCHEMA)]


class AgentList(BaseModel):
    """Answer of ``GET /agents``: the agents in code by name, then those defined at runtime."""

    data: list[AgentInfo]


class AgentRemoved(BaseModel):
    """Answer of ``DELETE /agents/{name}``: the revision that removed the agent."""

    name: str
    removed_revision: int


def _under_body(error: ChamviValidationError) -> ChamviValidationError:
    """A definition's issues at their place in the request, as FastAPI's own are (``body.tools.0``)."""
    issues = [type(i)(("body", *i.path), i.message, i.code) for i in error.issues]
    return ChamviValidationError(error.message, issues=issues)


def agents_router(directory: AgentDirectory | None, skills: SkillLibrary | None = None) -> APIRouter:
    """The ``/agents`` routes over ``directory``, and ``/agents/{name}/skills`` over ``skills``.

    Either may be None: its routes are then not served.
    """
    router = APIRouter(prefix="/agents", tags=["agents"])
    if skills is not None:
        _skills_route(router, skills, directory)
    if directory is None:
        return router

    @router.get(
        "",
        response_model=AgentList,
        response_model_exclude_none=True,
        responses=error_responses(401, 403, 503),
        openapi_extra=permission(READ),
        summary="List agents",
    )
    async def list_agents() -> AgentList:
        """Every agent runs may start: in code (`kind: code`), then at runtime with their `revision`."""
        return AgentList(data=await directory.list_agents())

    @router.get(
        "/{name}",
        response_model=AgentInfo,
        response_model_exclude_none=True,
        responses=error_responses(401, 403, 404, 422, 503),
        openapi_extra=permission(READ),
        summary="Show an agent",
    )
    async def get_agent(
        name: AgentName, revision: Annotated[int | None, Query(ge=1, le=10**9)] = None
    ) -> AgentInfo:
        """An agent; a runtime agent with its `definition`, at its latest revision or at `revision`."""
        return await directory.get_agent(name, revision)

    @router.put(
        "/{name}",
        status_code=200,
        response_model=AgentPutResult,
        response_model_exclude_none=True,
        responses={
            201: {"model": AgentPutResult, "description": "The agent is new (or was removed before)"},
            **error_responses(400, 401, 403, 409, 413, 422, 503),
        },
        openapi_extra=permission(WRITE),
        summary="Put an agent defined at runtime",
    )
    async def put_agent(
        name: AgentName,
        body: Annotated[AgentBody, Body(openapi_examples={"triage": {"value": _EXAMPLE}})],
        token: Principal,
        response: Response,
    ) -> AgentPutResult:
        """Stores the definition as the agent's next revision: 201 for a new agent, 200 otherwise.

        The tools it names come from the App's runtime tools, its model from the App's registry; a
        definition equal to the latest revision's writes nothing (`changed: false`). New runs start
        on the new revision; runs already going keep theirs. A name held by an agent in code
        answers 409.
        """
        try:
            put = await directory.put_agent(name, body, by=token.invoker())
        except ChamviValidationError as error:
            raise _under_body(error) from None
        if put.created:
            response.status_code = 201
        return put

    @router.delete(
        "/{name}",
        response_model=AgentRemoved,
        responses=error_responses(401, 403, 404, 409, 422, 503),
        openapi_extra=permission(WRITE),
        summary="Remove an agent defined at runtime",
    )
    async def remove_agent(name: AgentName, token: Principal) -> AgentRemoved:
        """New runs of the agent are refused (404 `agent_not_found`); runs going finish on their revision."""
        revision = await directory.remove_agent(name, by=token.invoker())
        return AgentRemoved(name=name, removed_revision=revision)

    return router


def _skills_route(router: APIRouter, skills: SkillLibrary, directory: AgentDirectory | None) -> None:
    @router.get(
        "/{name}/skills",
        summary="An agent's skills, at the catalog version a run starting now records",
        response_model=AgentSkills,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission(READ),
    )
    async def agent_skills(name: AgentName) -> AgentSkills:
        """Each skill's name, description, version, source and files; runs under way keep their own.

        An agent defined at runtime has the App's default skills.
        """
        agent = skills.app.agents.get(name)
        if agent is not None:
            return await skills.listing(agent)
        if directory is None:
            known = ", ".join(repr(a) for a in sorted(skills.app.agents)) or "none"
            raise AgentNotFoundError(f"unknown agent {name!r}: this app serves {known}")
        await directory.check(name)
        return await skills.runtime_listing(name)
