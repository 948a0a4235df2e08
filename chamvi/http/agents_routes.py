"""``/agents``: what the app's agents are made of, behind ``agents:read``; today their skills."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from chamvi.errors import AgentNotFoundError
from chamvi.http.auth import permission
from chamvi.http.errors import error_responses
from chamvi.models.skills import AgentSkills
from chamvi.skills.library import SkillLibrary

READ = "agents:read"

AgentName = Annotated[str, Path(min_length=1, max_length=64, description="The agent's name")]


def agents_router(skills: SkillLibrary) -> APIRouter:
    """The ``/agents`` routes over ``skills`` (the library of a worker in this process, or the API's own)."""
    router = APIRouter(prefix="/agents", tags=["agents"])

    @router.get(
        "/{agent}/skills",
        summary="An agent's skills, at the catalog version a run starting now records",
        response_model=AgentSkills,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission(READ),
    )
    async def agent_skills(agent: AgentName) -> AgentSkills:
        """Each skill's name, description, version, source and files; runs under way keep their own."""
        if agent not in skills.app.agents:
            known = ", ".join(repr(a) for a in sorted(skills.app.agents)) or "none"
            raise AgentNotFoundError(f"unknown agent {agent!r}: this app serves {known}")
        return await skills.listing(agent)

    return router
