"""chamvi-temporal: durable, self-hosted AI agents on Temporal.

Names are loaded on first use, so that importing a piece of chamvi (a workflow module replaying a
history, the shared models) does not load the whole package with its I/O clients.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chamvi.agents import (
        Agent,
        AgentHooks,
        AgentTrust,
        Budget,
        ToolCallInfo,
        define_agent,
    )
    from chamvi.app import (
        ActivityTimeouts,
        App,
    )
    from chamvi.app_runtime import AppRuntime
    from chamvi.approval_tokens import ApprovalTokens, resume
    from chamvi.artifacts import (
        ArtifactStore,
        Attachment,
        RunArtifacts,
        artifact_file_part,
        is_artifact_media_type,
    )
    from chamvi.channels import (
        Channel,
        ChannelContext,
        ChannelMessage,
        ChannelSubscription,
        InboundEvent,
        LifecycleChannel,
        console_channel,
    )
    from chamvi.client import (
        ChamviClient,
        DispatchResult,
    )
    from chamvi.context import (
        ContextKey,
        define_context_key,
        inject,
        try_inject,
    )
    from chamvi.conversations.client import SentMessage
    from chamvi.errors import (
        ApprovalNotPendingError,
        ApprovalTokenExpiredError,
        ApprovalTokenInvalidError,
        ArtifactNotFoundError,
        AttachmentTooLargeError,
        BackgroundError,
        BudgetExceededError,
        ChamviError,
        ChamviValidationError,
        ChannelDeliveryError,
        ChannelNotFoundError,
        ChannelUnavailableError,
        ContextNotProvidedError,
        ErrorCode,
        FatalToolError,
        IdleTimeoutError,
        IncompleteResponseError,
        InvalidAgentDefinitionError,
        InvalidInputError,
        InvalidRunStateError,
        InvalidScheduleError,
        ModelError,
        ProviderUnavailableError,
        RunNotFoundError,
        RunTimeoutError,
        ScheduleNotFoundError,
        ToolDeniedError,
        ToolNotAllowedError,
        ToolResultTooLargeError,
        ValidationIssue,
    )
    from chamvi.extraction import extract
    from chamvi.knowledge import (
        define_source,
        folder,
        knowledge_collection,
        knowledge_tools,
    )
    from chamvi.knowledge.collections import ManagedRoutes
    from chamvi.knowledge.remote import CollectionSearch
    from chamvi.knowledge.standalone import Knowledge
    from chamvi.knowledge_mcp import knowledge_http_app, knowledge_server
    from chamvi.mcp import (
        McpServer,
        mcp_server,
        mcp_tools,
    )
    from chamvi.models import (
        ApprovalDecision,
        Artifact,
        ContentPart,
        FilePart,
        ImagePart,
        Invoker,
        Message,
        ProviderOptions,
        RunStatus,
        RunView,
        ScheduleView,
        TextPart,
        TriggerEnvelope,
    )
    from chamvi.permissions import (
        PolicyRun,
        has_permission,
        matches_permission,
        require_tool_permission,
    )
    from chamvi.plugin import (
        ChamviPlugin,
    )
    from chamvi.providers import (
        ModelRegistry,
        ScriptedModel,
    )
    from chamvi.recall import RecallPolicy
    from chamvi.retry import (
        RetryPolicies,
    )
    from chamvi.run_events import RunEvent
    from chamvi.runtime import (
        build_worker,
    )
    from chamvi.schedules import AgentSchedule, define_schedule
    from chamvi.state import (
        AgentState,
    )
    from chamvi.tool_factory import ToolFactoryContext
    from chamvi.tools import (
        EffectSpec,
        Tool,
        ToolContext,
        Trust,
        approve,
        effect_marker,
        effect_tool,
        tool,
    )
    from chamvi.webhooks import (
        WebhookChannel,
        webhook_channel,
    )
    from chamvi.wrapped_tools import ToolsForRun, wrap_tools_for_run

_EXPORTS: dict[str, str] = {
    "ContentPart": "chamvi.models",
    "FilePart": "chamvi.models",
    "ImagePart": "chamvi.models",
    "Message": "chamvi.models",
    "ProviderOptions": "chamvi.models",
    "TextPart": "chamvi.models",
    "artifact_file_part": "chamvi.artifacts",
    "ToolsForRun": "chamvi.wrapped_tools",
    "wrap_tools_for_run": "chamvi.wrapped_tools",
    "define_schedule": "chamvi.schedules",
    "AppRuntime": "chamvi.app_runtime",
    "ToolFactoryContext": "chamvi.tool_factory",
    "ActivityTimeouts": "chamvi.app",
    "Agent": "chamvi.agents",
    "AgentHooks": "chamvi.agents",
    "AgentState": "chamvi.state",
    "AgentTrust": "chamvi.agents",
    "App": "chamvi.app",
    "ApprovalDecision": "chamvi.models",
    "ApprovalNotPendingError": "chamvi.errors",
    "ApprovalTokenExpiredError": "chamvi.errors",
    "ApprovalTokenInvalidError": "chamvi.errors",
    "ApprovalTokens": "chamvi.approval_tokens",
    "Artifact": "chamvi.models",
    "ArtifactNotFoundError": "chamvi.errors",
    "ArtifactStore": "chamvi.artifacts",
    "Attachment": "chamvi.artifacts",
    "AttachmentTooLargeError": "chamvi.errors",
    "BackgroundError": "chamvi.errors",
    "Budget": "chamvi.agents",
    "BudgetExceededError": "chamvi.errors",
    "ChamviClient": "chamvi.client",
    "ChamviError": "chamvi.errors",
    "ChamviPlugin": "chamvi.plugin",
    "ChamviValidationError": "chamvi.errors",
    "Channel": "chamvi.channels",
    "ChannelContext": "chamvi.channels",
    "ChannelDeliveryError": "chamvi.errors",
    "ChannelMessage": "chamvi.channels",
    "ChannelNotFoundError": "chamvi.errors",
    "ChannelSubscription": "chamvi.channels",
    "ChannelUnavailableError": "chamvi.errors",
    "CollectionSearch": "chamvi.knowledge.remote",
    "ContextKey": "chamvi.context",
    "ContextNotProvidedError": "chamvi.errors",
    "DispatchResult": "chamvi.client",
    "EffectSpec": "chamvi.tools",
    "ErrorCode": "chamvi.errors",
    "FatalToolError": "chamvi.errors",
    "IdleTimeoutError": "chamvi.errors",
    "InboundEvent": "chamvi.channels",
    "IncompleteResponseError": "chamvi.errors",
    "InvalidAgentDefinitionError": "chamvi.errors",
    "InvalidInputError": "chamvi.errors",
    "InvalidRunStateError": "chamvi.errors",
    "Invoker": "chamvi.models",
    "Knowledge": "chamvi.knowledge.standalone",
    "LifecycleChannel": "chamvi.channels",
    "ManagedRoutes": "chamvi.knowledge.collections",
    "McpServer": "chamvi.mcp",
    "ModelError": "chamvi.errors",
    "ModelRegistry": "chamvi.providers",
    "PolicyRun": "chamvi.permissions",
    "ProviderUnavailableError": "chamvi.errors",
    "RecallPolicy": "chamvi.recall",
    "RetryPolicies": "chamvi.retry",
    "RunArtifacts": "chamvi.artifacts",
    "RunEvent": "chamvi.run_events",
    "RunNotFoundError": "chamvi.errors",
    "RunStatus": "chamvi.models",
    "RunTimeoutError": "chamvi.errors",
    "RunView": "chamvi.models",
    "ScriptedModel": "chamvi.providers",
    "SentMessage": "chamvi.conversations.client",
    "Tool": "chamvi.tools",
    "ToolCallInfo": "chamvi.agents",
    "ToolContext": "chamvi.tools",
    "ToolDeniedError": "chamvi.errors",
    "ToolNotAllowedError": "chamvi.errors",
    "ToolResultTooLargeError": "chamvi.errors",
    "TriggerEnvelope": "chamvi.models",
    "Trust": "chamvi.tools",
    "ValidationIssue": "chamvi.errors",
    "WebhookChannel": "chamvi.webhooks",
    "approve": "chamvi.tools",
    "build_worker": "chamvi.runtime",
    "AgentSchedule": "chamvi.schedules",
    "InvalidScheduleError": "chamvi.errors",
    "ScheduleNotFoundError": "chamvi.errors",
    "ScheduleView": "chamvi.models",
    "console_channel": "chamvi.channels",
    "define_agent": "chamvi.agents",
    "define_context_key": "chamvi.context",
    "define_source": "chamvi.knowledge",
    "effect_marker": "chamvi.tools",
    "effect_tool": "chamvi.tools",
    "extract": "chamvi.extraction",
    "folder": "chamvi.knowledge",
    "has_permission": "chamvi.permissions",
    "inject": "chamvi.context",
    "is_artifact_media_type": "chamvi.artifacts",
    "knowledge_collection": "chamvi.knowledge",
    "knowledge_http_app": "chamvi.knowledge_mcp",
    "knowledge_server": "chamvi.knowledge_mcp",
    "knowledge_tools": "chamvi.knowledge",
    "matches_permission": "chamvi.permissions",
    "mcp_server": "chamvi.mcp",
    "mcp_tools": "chamvi.mcp",
    "require_tool_permission": "chamvi.permissions",
    "resume": "chamvi.approval_tokens",
    "tool": "chamvi.tools",
    "try_inject": "chamvi.context",
    "webhook_channel": "chamvi.webhooks",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chamvi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ActivityTimeouts",
    "Agent",
    "AgentHooks",
    "AgentSchedule",
    "AgentState",
    "AgentTrust",
    "App",
    "AppRuntime",
    "ApprovalDecision",
    "ApprovalNotPendingError",
    "ApprovalTokenExpiredError",
    "ApprovalTokenInvalidError",
    "ApprovalTokens",
    "Artifact",
    "ArtifactNotFoundError",
    "ArtifactStore",
    "Attachment",
    "AttachmentTooLargeError",
    "BackgroundError",
    "Budget",
    "BudgetExceededError",
    "ChamviClient",
    "ChamviError",
    "ChamviPlugin",
    "ChamviValidationError",
    "Channel",
    "ChannelContext",
    "ChannelDeliveryError",
    "ChannelMessage",
    "ChannelNotFoundError",
    "ChannelSubscription",
    "ChannelUnavailableError",
    "CollectionSearch",
    "ContentPart",
    "ContextKey",
    "ContextNotProvidedError",
    "DispatchResult",
    "EffectSpec",
    "ErrorCode",
    "FatalToolError",
    "FilePart",
    "IdleTimeoutError",
    "ImagePart",
    "InboundEvent",
    "IncompleteResponseError",
    "InvalidAgentDefinitionError",
    "InvalidInputError",
    "InvalidRunStateError",
    "InvalidScheduleError",
    "Invoker",
    "Knowledge",
    "LifecycleChannel",
    "ManagedRoutes",
    "McpServer",
    "Message",
    "ModelError",
    "ModelRegistry",
    "PolicyRun",
    "ProviderOptions",
    "ProviderUnavailableError",
    "RecallPolicy",
    "RetryPolicies",
    "RunArtifacts",
    "RunEvent",
    "RunNotFoundError",
    "RunStatus",
    "RunTimeoutError",
    "RunView",
    "ScheduleNotFoundError",
    "ScheduleView",
    "ScriptedModel",
    "SentMessage",
    "TextPart",
    "Tool",
    "ToolCallInfo",
    "ToolContext",
    "ToolDeniedError",
    "ToolFactoryContext",
    "ToolNotAllowedError",
    "ToolResultTooLargeError",
    "ToolsForRun",
    "TriggerEnvelope",
    "Trust",
    "ValidationIssue",
    "WebhookChannel",
    "approve",
    "artifact_file_part",
    "build_worker",
    "console_channel",
    "define_agent",
    "define_context_key",
    "define_schedule",
    "define_source",
    "effect_marker",
    "effect_tool",
    "extract",
    "folder",
    "has_permission",
    "inject",
    "is_artifact_media_type",
    "knowledge_collection",
    "knowledge_http_app",
    "knowledge_server",
    "knowledge_tools",
    "matches_permission",
    "mcp_server",
    "mcp_tools",
    "require_tool_permission",
    "resume",
    "tool",
    "try_inject",
    "webhook_channel",
    "wrap_tools_for_run",
]
