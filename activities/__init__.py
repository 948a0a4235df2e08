"""Temporal activities: every model call, tool call and client call a run makes."""

from .agents import AgentActivities
from .conversations import ConversationActivities
from .knowledge import KnowledgeActivities
from .locks import LockActivities
from .mcp import McpActivities
from .model import ModelActivities
from .runs import RunActivities
from .schedules import ScheduleActivities
from .state import StateActivities
from .tools import ToolActivities

__all__ = [
    "AgentActivities",
    "ConversationActivities",
    "KnowledgeActivities",
    "LockActivities",
    "McpActivities",
    "ModelActivities",
    "RunActivities",
    "ScheduleActivities",
    "StateActivities",
    "ToolActivities",
]
