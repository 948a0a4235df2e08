"""Reading an agent's state from outside a run: ``chamvi state list`` (through a worker) and HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chamvi.errors import NotFoundError
from chamvi.models.state import StateListing, StateListRequest
from chamvi.state.store import StateStore

if TYPE_CHECKING:  # the app imports the agents, which import this package
    from chamvi.app import App
    from chamvi.runtime_agents import RuntimeAgents


class StateViews:
    """Pages of the state of ``app``'s agents, as stored (JSON values).

    With ``agents``, those defined at runtime too (their key-value entries: they declare no
    collections).
    """

    def __init__(self, app: App, store: StateStore, agents: RuntimeAgents | None = None) -> None:
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
