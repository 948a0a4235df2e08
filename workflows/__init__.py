"""Temporal workflow code only: deterministic, no I/O, no clock, no randomness."""

from workflows.agent_run import AgentRunWorkflow
from workflows.concurrency_lock import ConcurrencyLockWorkflow

WORKFLOWS = [AgentRunWorkflow, ConcurrencyLockWorkflow]

__all__ = ["WORKFLOWS", "AgentRunWorkflow", "ConcurrencyLockWorkflow"]
