"""Temporal workflow code only: deterministic, no I/O, no clock, no randomness."""

from workflows.agent_check import AgentCheckWorkflow
from workflows.agent_run import AgentRunWorkflow
from workflows.concurrency_lock import ConcurrencyLockWorkflow
from workflows.knowledge import (
    KnowledgeCollectionWorkflow,
    KnowledgeSearchWorkflow,
    KnowledgeSyncRequestWorkflow,
)

WORKFLOWS = [
    AgentRunWorkflow,
    AgentCheckWorkflow,
    ConcurrencyLockWorkflow,
    KnowledgeCollectionWorkflow,
    KnowledgeSyncRequestWorkflow,
    KnowledgeSearchWorkflow,
]

__all__ = [
    "WORKFLOWS",
    "AgentCheckWorkflow",
    "AgentRunWorkflow",
    "ConcurrencyLockWorkflow",
    "KnowledgeCollectionWorkflow",
    "KnowledgeSearchWorkflow",
    "KnowledgeSyncRequestWorkflow",
]
