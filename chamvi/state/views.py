"""Reading an agent's state from outside a run: ``chamvi state list`` (through a worker) and HTTP."""

from __future__ import annotations

from collections.abc import Container
from typing import Protocol

from chamvi.errors import NotFoundError
from chamvi.models.state import StateListing, StateListRequest
from chamvi.state.definition import AgentState
from chamvi.state.store import StateStore


class StatefulAgent(Protocol):
    """What the views read of an agent (a ``chamvi.Agent``, whose module imports this package)."""

    @property
    def name(self) -> str:
        """The agent's name, its state's key."""
        ...

    @property
    def state(self) -> AgentState:
        """The state collections it declares."""
        ...


class StateOwner(Protocol):
    """What the views read of the App, which stands above the state package."""

    @property
    def agents(self) -> Container[str]:
        """The names of the agents defined in code."""
        ...

    def agent(self, name: str) -> StatefulAgent:
        """The agent ``name``, or ``AgentNotFoundError``."""
        ...


class RuntimeDirectory(Protocol):
    """What the views read of the agents defined at runtime (``chamvi.dynamic_agents.RuntimeAgents``)."""

    async def current(self, name: str) -> StatefulAgent:
        """The current revision of ``name``, or ``AgentNotFoundError``."""
        ...


class StateViews:
    """Pages of the state of ``app``'s agents, as stored (JSON values).

    With ``agents``, those defined at runtime too (their key-value entries: they declare no
    collections).
    """

    def __init__(self, app: StateOwner, store: StateStore, agents: RuntimeDirectory | None = None) -> None:
        self.app = app
        self.store = store
        self.agents = agents

    async def listing(self, request: StateListRequest) -> StateListing:
        """A page of one collection, or of the key-value entries with each collection's size.

        Raises:
            AgentNotFoundError: the app serves no such agent.
            NotFoundError: the agent declares no such collection.
        """
        if self.agents is not None and request.agent not in self.app.agents:
            agent = await self.agents.current(request.agent)
        else:
            agent = self.app.agent(request.agent)
        declared = agent.state.collections
        if request.collection is not None and request.collection not in declared:
            names = ", ".join(repr(c) for c in declared) or "none"
            raise NotFoundError(
                f"unknown state collection {request.collection!r} of agent {agent.name!r}: "
                f"declared collections are {names}"
            )
        page = await self.store.page(
            agent.name, request.collection, limit=request.limit, offset=request.offset
        )
        counts = (
            {name: await self.store.count(agent.name, name) for name in declared}
            if request.collection is None
            else {}
        )
        return StateListing(agent=agent.name, collection=request.collection, page=page, collections=counts)
