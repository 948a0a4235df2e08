"""Agent state: what an agent remembers between runs, in the Qdrant the knowledge index runs.

``define_agent(state=AgentState(collections={"refunds": Refund}))`` declares typed collections; every
agent has a key-value space too. Tools read and write it through ``ctx.state``, and the model through
the generated ``state_<collection>_list / _upsert / _remove`` tools.
"""

from typing import Any

from chamvi.state.access import STATE_STORE, AgentStateAccess, StateCollection
from chamvi.state.definition import AgentState, check_state
from chamvi.state.store import StateStore

__all__ = [
    "STATE_STORE",
    "AgentState",
    "AgentStateAccess",
    "StateCollection",
    "StateStore",
    "check_state",
    "state_tools",
]


def __getattr__(name: str) -> Any:
    """``state_tools``, still importable from here, loaded on first use.

    The generated tools are built on ``chamvi.tools``, whose ``ToolContext.state`` is this package's
    ``AgentStateAccess``: they live in ``chamvi.state.tools``, which this face does not import.
    """
    if name == "state_tools":
        from chamvi.state.tools import state_tools

        return state_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
