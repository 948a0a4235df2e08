"""``AgentState``: what an agent remembers between runs, declared on ``define_agent(state=...)``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from chamvi._constants import STATE_COLLECTION_MAX_LENGTH, STATE_COLLECTION_PATTERN
from chamvi.errors import InvalidAgentDefinitionError


@dataclass(frozen=True)
class AgentState:
    """An agent's typed state collections; every agent also has a key-value space (``ctx.state.get``).

    Args:
        collections: pydantic models by collection name; an upsert is validated by its model. The
            model also gets each collection as the tools ``state_<name>_list``, ``state_<name>_upsert``
            and ``state_<name>_remove`` (upsert and remove are effect tools).
    """

    collections: Mapping[str, type[BaseModel]] = field(default_factory=dict)


def check_state(agent: str, state: Any) -> AgentState:
    """``state`` as an :class:`AgentState` (a plain mapping of models is taken as its collections).

    Raises:
        InvalidAgentDefinitionError: a collection name breaks the rule, or its schema is no pydantic model.
    """
    if state is None:
        return AgentState()
    if isinstance(state, Mapping):
        state = AgentState(collections=dict(state))
    if not isinstance(state, AgentState):
        raise InvalidAgentDefinitionError(
            f"agent {agent!r}: state must be an AgentState(collections={{...}}) or a mapping of "
            "collection names to pydantic models"
        )
    for name, model in state.collections.items():
        if (
            not isinstance(name, str)
            or not re.match(STATE_COLLECTION_PATTERN, name)
            or len(name) > STATE_COLLECTION_MAX_LENGTH
        ):
            raise InvalidAgentDefinitionError(
                f"agent {agent!r}: state collection name {name!r} is invalid: use lowercase letters and "
                f"digits in words joined by single '_' ({STATE_COLLECTION_PATTERN}), at most "
                f"{STATE_COLLECTION_MAX_LENGTH} characters"
            )
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise InvalidAgentDefinitionError(
                f"agent {agent!r}: state collection {name!r} must map to a pydantic model class, "
                f"not {model!r}"
            )
    return state
