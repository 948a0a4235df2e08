"""chamvi-temporal: durable, self-hosted AI agents on Temporal."""

from chamvi.agents import Agent, AgentHooks, Budget, ToolCallInfo, define_agent
from chamvi.app import ActivityTimeouts, App
from chamvi.channels import Channel, ChannelMessage, ChannelSubscription, console_channel
from chamvi.client import ChamviClient, DispatchResult
from chamvi.context import ContextKey, ContextNotProvidedError, define_context_key, inject, try_inject
from chamvi.errors import (
    ApprovalNotPendingError,
    BudgetExceededError,
    ChamviError,
    ChannelNotFoundError,
    ErrorCode,
    FatalToolError,
    IncompleteResponseError,
    InvalidAgentDefinitionError,
    InvalidInputError,
    InvalidRunStateError,
    RunNotFoundError,
    TimeoutError,
    ToolDeniedError,
    ToolNotAllowedError,
    ValidationError,
)
from chamvi.knowledge import define_source, folder, knowledge_collection, knowledge_tools
from chamvi.models import ApprovalDecision, Invoker, RunStatus, RunView, TriggerEnvelope
from chamvi.permissions import PolicyRun, has_permission, matches_permission, require_tool_permission
from chamvi.providers import ModelRegistry, ScriptedModel
from chamvi.tools import Tool, ToolContext, Trust, approve, effect_marker, effect_tool, tool

__all__ = [
    "ActivityTimeouts",
    "Agent",
    "AgentHooks",
    "App",
    "ApprovalDecision",
    "ApprovalNotPendingError",
    "Budget",
    "BudgetExceededError",
    "ChamviClient",
    "ChamviError",
    "Channel",
    "ChannelMessage",
    "ChannelNotFoundError",
    "ChannelSubscription",
    "ContextKey",
    "ContextNotProvidedError",
    "DispatchResult",
    "ErrorCode",
    "FatalToolError",
    "IncompleteResponseError",
    "InvalidAgentDefinitionError",
    "InvalidInputError",
    "InvalidRunStateError",
    "Invoker",
    "ModelRegistry",
    "PolicyRun",
    "RunNotFoundError",
    "RunStatus",
    "RunView",
    "ScriptedModel",
    "TimeoutError",
    "Tool",
    "ToolCallInfo",
    "ToolContext",
    "ToolDeniedError",
    "ToolNotAllowedError",
    "TriggerEnvelope",
    "Trust",
    "ValidationError",
    "approve",
    "console_channel",
    "define_agent",
    "define_context_key",
    "define_source",
    "effect_marker",
    "effect_tool",
    "folder",
    "has_permission",
    "inject",
    "knowledge_collection",
    "knowledge_tools",
    "matches_permission",
    "require_tool_permission",
    "tool",
    "try_inject",
]
