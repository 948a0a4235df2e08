"""Agents for workflows that never import the app: a run's spec, and the runtime agents' registry.

Processes without the app put, remove and read agents defined at runtime through a worker.
"""

from __future__ import annotations

from temporalio import activity

from chamvi._constants import ACTIVITY_AGENT_REGISTRY, ACTIVITY_DESCRIBE_AGENT
from chamvi.models import AgentSpec, DescribeAgentRequest
from chamvi.models.agents import AgentRegistryRequest, AgentRegistryResult
from chamvi.permissions import PolicyRun
from chamvi.worker_state import AppRuntime


class AgentActivities:
    """Holds the worker's runtime: an agent's spec comes from its App, a run's tools from its factory."""

    def __init__(self, runtime: AppRuntime) -> None:
        self.runtime = runtime

    @activity.defn(name=ACTIVITY_DESCRIBE_AGENT)
    async def describe_agent(self, request: DescribeAgentRequest) -> AgentSpec:
        """The agent's spec; for a run, where this process starts relaying its events.

        A run is described once, at its start, so the process that starts a run relays its events
        to its ``App.on`` listeners, each once. An agent defined at runtime is described at its
        latest revision, which the spec records: the run keeps it to its end, as it keeps the version
        of its skills the spec records (``AgentSpec.skills_version``). A check before a dispatch
        with model settings (``request.model_settings``) refuses the settings the agent does not let
        a dispatch set.

        Raises:
            ChamviValidationError: the dispatch's settings set what the agent's ``dispatch_settings``
                do not allow, or past a cap.
        """
        run = (
            PolicyRun(request.run_id, request.agent, request.trigger)
            if request.run_id is not None and request.trigger is not None
            else None
        )
        if request.model_settings is not None:
            agent = await self.runtime.agents.current(request.agent)
            agent.dispatch_settings.check(agent.name, request.model_settings)
        spec = await self.runtime.describe(request.agent, run)
        if run is not None:
            self.runtime.events.follow(activity.client(), run.run_id)
        return spec

    @activity.defn(name=ACTIVITY_AGENT_REGISTRY)
    async def agent_registry(self, request: AgentRegistryRequest) -> AgentRegistryResult:
        """One operation on the worker's agents (``chamvi.dynamic_agents.RuntimeAgents``).

        Raises:
            ChamviValidationError: a put's name or definition is invalid (``issues`` by field).
            ConflictError: the name is an agent in code.
            AgentNotFoundError: a remove or read of no such agent (or revision).
        """
        agents = self.runtime.agents
        name = request.name or ""
        if request.action == "put":
            put = await agents.put_agent(
                name, request.definition or {}, by=request.by, request_id=request.request_id
            )
            return AgentRegistryResult(put=put)
        if request.action == "remove":
            removed = await agents.remove_agent(name, by=request.by, request_id=request.request_id)
            return AgentRegistryResult(removed_revision=removed)
        if request.action == "get":
            return AgentRegistryResult(agent=await agents.get_agent(name, request.revision))
        return AgentRegistryResult(agents=await agents.list_agents())
