"""Agent state: what an agent remembers between runs, in the Qdrant the knowledge index runs.

``define_agent(state=AgentState(collections={"refunds": Refund}))`` declares typed collections; every
agent has a key-value space too. Tools read and write it through ``ctx.state``, and the model through
the generated ``state_<collection>_list / _upsert / _remove`` tools.
"""

from chamvi.state.access import STATE_STORE, AgentStateAccess, StateCollection
from chamvi.state.definition import AgentState, check_state
from chamvi.state.store import StateStore
from chamvi.state.tools import state_tools

__all__ = [
    "STATE_STORE",
    "AgentState",
    "AgentStateAccess",
    "StateCollection",
    "StateStore",
    "check_state",
    "state_tools",
]
