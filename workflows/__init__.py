"""Temporal workflow code only: deterministic, no I/O, no clock, no randomness.

The names load on first use (PEP 562): the workflow sandbox imports a run's module afresh for every
run it starts, parent package included, and an eager ``__init__`` made each ``AgentRun`` import
every other workflow module too (about a third of a run's fixed CPU on the worker).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent_check import AgentCheckWorkflow
    from .agent_registry import AgentRegistryWorkflow
    from .agent_run import AgentRunWorkflow
    from .concurrency_lock import ConcurrencyLockWorkflow
    from .conversation import ConversationWorkflow
    from .knowledge import (
        KnowledgeCollectionWorkflow,
        KnowledgeSearchWorkflow,
        KnowledgeSyncRequestWorkflow,
    )
    from .knowledge_pass import KnowledgePassWorkflow
    from .scheduled_run import ScheduledRunWorkflow
    from .state_list import AgentStateListWorkflow

_EXPORTS: dict[str, str] = {
    "AgentRunWorkflow": "agent_run",
    "AgentCheckWorkflow": "agent_check",
    "ConcurrencyLockWorkflow": "concurrency_lock",
    "KnowledgeCollectionWorkflow": "knowledge",
    "KnowledgeSyncRequestWorkflow": "knowledge",
    "KnowledgeSearchWorkflow": "knowledge",
    "KnowledgePassWorkflow": "knowledge_pass",
    "AgentStateListWorkflow": "state_list",
    "ScheduledRunWorkflow": "scheduled_run",
    "ConversationWorkflow": "conversation",
    "AgentRegistryWorkflow": "agent_registry",
}
"""Each workflow class by the module that defines it, in the order ``WORKFLOWS`` lists them."""


def __getattr__(name: str) -> Any:
    if name == "WORKFLOWS":
        value: Any = [__getattr__(n) for n in _EXPORTS]
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


WORKFLOWS: list[type]
"""Every workflow chamvi's worker serves (``ChamviPlugin`` registers them)."""

__all__ = [
    "WORKFLOWS",
    "AgentCheckWorkflow",
    "AgentRegistryWorkflow",
    "AgentRunWorkflow",
    "AgentStateListWorkflow",
    "ConcurrencyLockWorkflow",
    "ConversationWorkflow",
    "KnowledgeCollectionWorkflow",
    "KnowledgePassWorkflow",
    "KnowledgeSearchWorkflow",
    "KnowledgeSyncRequestWorkflow",
    "ScheduledRunWorkflow",
]
