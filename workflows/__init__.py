"""Temporal workflow code only: deterministic, no I/O, no clock, no randomness."""

from .agent_check import AgentCheckWorkflow
from .agent_run import AgentRunWorkflow
from .concurrency_lock import ConcurrencyLockWorkflow
from .knowledge import (
    KnowledgeCollectionWorkflow,
    KnowledgeSearchWorkflow,
    KnowledgeSyncRequestWorkflow,
)
from .scheduled_run import ScheduledRunWorkflow

WORKFLOWS = [
    AgentRunWorkflow,
    AgentCheckWorkflow,
    ConcurrencyLockWorkflow,
    KnowledgeCollectionWorkflow,
    KnowledgeSyncRequestWorkflow,
    KnowledgeSearchWorkflow,
    ScheduledRunWorkflow,
]

__all__ = [
    "WORKFLOWS",
    "AgentCheckWorkflow",
    "AgentRunWorkflow",
    "ConcurrencyLockWorkflow",
    "KnowledgeCollectionWorkflow",
    "KnowledgeSearchWorkflow",
    "KnowledgeSyncRequestWorkflow",
    "ScheduledRunWorkflow",
]
