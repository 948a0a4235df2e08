"""Temporal activities: every model call, tool call and client call a run makes."""

from activities.agents import AgentActivities
from activities.knowledge import KnowledgeActivities
from activities.locks import LockActivities
from activities.model import ModelActivities
from activities.tools import ToolActivities

__all__ = ["AgentActivities", "KnowledgeActivities", "LockActivities", "ModelActivities", "ToolActivities"]
