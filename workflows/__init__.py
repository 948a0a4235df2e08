"""Temporal workflow code only: deterministic, no I/O, no clock, no randomness."""

from .agent_check import AgentCheckWorkflow
from .agent_registry import AgentRegistryWorkflow
from .agent_run import AgentRunWorkflow
from .concurrency_lock import ConcurrencyLockWorkflow
from .knowledge import (
    KnowledgeCollectionWorkflow,
    KnowledgeSearchWorkflow,
    KnowledgeSyncRequestWorkflow,
)
from .scheduled_run import ScheduledRunWorkflow
from .state_list import AgentStateListWorkflow

WORKFLOWS = [
    AgentRunWorkflow,
    AgentCheckWorkflow,
    ConcurrencyLockWorkflow,
    KnowledgeCollectionWorkflow,
    KnowledgeSyncRequestWorkflow,
    KnowledgeSearchWorkflow,
    AgentStateListWorkflow,
    ScheduledRunWorkflow,
    AgentRegistryWorkflow,
]

__all__ = [
    "WORKFLOWS",
    "AgentCheckWorkflow",
    "AgentRegistryWorkflow",
    "AgentRunWorkflow",
    "AgentStateListWorkflow",
    "ConcurrencyLockWorkflow",
    "KnowledgeCollectionWorkflow",
    "KnowledgeSearchWorkflow",
    "KnowledgeSyncRequestWorkflow",
    "ScheduledRunWorkflow",
]
