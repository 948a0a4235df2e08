"""chamvi-temporal: durable, self-hosted AI agents on Temporal.

Names are loaded on first use, so that importing a piece of chamvi (a workflow module replaying a
history, the shared models) does not load the whole package with its I/O clients.

The public names are listed twice: in ``_PUBLIC`` (which module defines each), which drives the lazy
loading, ``__all__`` and ``dir(chamvi)``, and in the ``TYPE_CHECKING`` imports, for type checkers and
editors (a test keeps the two the same).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chamvi.agent_revisions import AgentRevisionStore as AgentRevisionStore
    from chamvi.agent_revisions import ObjectRevisionStore as ObjectRevisionStore
    from chamvi.agents import Agent as Agent
    from chamvi.agents import AgentHooks as AgentHooks
    from chamvi.agents import AgentTrust as AgentTrust
    from chamvi.agents import Budget as Budget
    from chamvi.agents import ToolCallInfo as ToolCallInfo
    from chamvi.agents import define_agent as define_agent
    from chamvi.app import ActivityTimeouts as ActivityTimeouts
    from chamvi.app import App as App
    from chamvi.approval_tokens import ApprovalTokens as ApprovalTokens
    from chamvi.artifacts import ArtifactStore as ArtifactStore
    from chamvi.artifacts import Attachment as Attachment
    from chamvi.artifacts import RunArtifacts as RunArtifacts
    from chamvi.artifacts import artifact_file_part as artifact_file_part
    from chamvi.artifacts import is_artifact_media_type as is_artifact_media_type
    from chamvi.channels import Channel as Channel
    from chamvi.channels import ChannelContext as ChannelContext
    from chamvi.channels import ChannelMessage as ChannelMessage
    from chamvi.channels import ChannelSubscription as ChannelSubscription
    from chamvi.channels import InboundEvent as InboundEvent
    from chamvi.channels import LifecycleChannel as LifecycleChannel
    from chamvi.channels import console_channel as console_channel
    from chamvi.client import ChamviClient as ChamviClient
    from chamvi.client import DispatchResult as DispatchResult
    from chamvi.client import resume as resume
    from chamvi.context import ContextKey as ContextKey
    from chamvi.context import define_context_key as define_context_key
    from chamvi.context import inject as inject
    from chamvi.context import try_inject as try_inject
    from chamvi.conversations.client import SentMessage as SentMessage
    from chamvi.conversations.recall import RecallPolicy as RecallPolicy
    from chamvi.dynamic_agents import RuntimeAgents as RuntimeAgents
    from chamvi.errors import ApprovalNotPendingError as ApprovalNotPendingError
    from chamvi.errors import ApprovalTokenExpiredError as ApprovalTokenExpiredError
    from chamvi.errors import ApprovalTokenInvalidError as ApprovalTokenInvalidError
    from chamvi.errors import ArtifactNotFoundError as ArtifactNotFoundError
    from chamvi.errors import AttachmentTooLargeError as AttachmentTooLargeError
    from chamvi.errors import BackgroundError as BackgroundError
    from chamvi.errors import BudgetExceededError as BudgetExceededError
    from chamvi.errors import ChamviError as ChamviError
    from chamvi.errors import ChamviValidationError as ChamviValidationError
    from chamvi.errors import ChannelDeliveryError as ChannelDeliveryError
    from chamvi.errors import ChannelNotFoundError as ChannelNotFoundError
    from chamvi.errors import ChannelUnavailableError as ChannelUnavailableError
    from chamvi.errors import ContextNotProvidedError as ContextNotProvidedError
    from chamvi.errors import ErrorCode as ErrorCode
    from chamvi.errors import FatalToolError as FatalToolError
    from chamvi.errors import IdleTimeoutError as IdleTimeoutError
    from chamvi.errors import IncompleteResponseError as IncompleteResponseError
    from chamvi.errors import InvalidAgentDefinitionError as InvalidAgentDefinitionError
    from chamvi.errors import InvalidInputError as InvalidInputError
    from chamvi.errors import InvalidRunStateError as InvalidRunStateError
    from chamvi.errors import InvalidScheduleError as InvalidScheduleError
    from chamvi.errors import ModelError as ModelError
    from chamvi.errors import ProviderUnavailableError as ProviderUnavailableError
    from chamvi.errors import RunNotFoundError as RunNotFoundError
    from chamvi.errors import RunTimeoutError as RunTimeoutError
    from chamvi.errors import ScheduleNotFoundError as ScheduleNotFoundError
    from chamvi.errors import ToolDeniedError as ToolDeniedError
    from chamvi.errors import ToolNotAllowedError as ToolNotAllowedError
    from chamvi.errors import ToolResultTooLargeError as ToolResultTooLargeError
    from chamvi.errors import ValidationIssue as ValidationIssue
    from chamvi.extraction import extract as extract
    from chamvi.knowledge import define_source as define_source
    from chamvi.knowledge import folder as folder
    from chamvi.knowledge import git as git
    from chamvi.knowledge import knowledge_collection as knowledge_collection
    from chamvi.knowledge import knowledge_tools as knowledge_tools
    from chamvi.knowledge import urls as urls
    from chamvi.knowledge.collections import ManagedRoutes as ManagedRoutes
    from chamvi.knowledge.remote import CollectionSearch as CollectionSearch
    from chamvi.knowledge_standalone import Knowledge as Knowledge
    from chamvi.mcp import McpServer as McpServer
    from chamvi.mcp import mcp_server as mcp_server
    from chamvi.mcp import mcp_tools as mcp_tools
    from chamvi.mcp.knowledge import knowledge_http_app as knowledge_http_app
    from chamvi.mcp.knowledge import knowledge_server as knowledge_server
    from chamvi.models import AgentDefinition as AgentDefinition
    from chamvi.models import AgentInfo as AgentInfo
    from chamvi.models import AgentPutResult as AgentPutResult
    from chamvi.models import ApprovalDecision as ApprovalDecision
    from chamvi.models import Artifact as Artifact
    from chamvi.models import ContentPart as ContentPart
    from chamvi.models import DispatchSettings as DispatchSettings
    from chamvi.models import FilePart as FilePart
    from chamvi.models import ImagePart as ImagePart
    from chamvi.models import Invoker as Invoker
    from chamvi.models import Message as Message
    from chamvi.models import ModelSettings as ModelSettings
    from chamvi.models import NamedTool as NamedTool
    from chamvi.models import ProviderOptions as ProviderOptions
    from chamvi.models import RunStatus as RunStatus
    from chamvi.models import RunView as RunView
    from chamvi.models import ScheduleView as ScheduleView
    from chamvi.models import TextPart as TextPart
    from chamvi.models import TriggerEnvelope as TriggerEnvelope
    from chamvi.permissions import PolicyRun as PolicyRun
    from chamvi.permissions import has_permission as has_permission
    from chamvi.permissions import matches_permission as matches_permission
    from chamvi.permissions import require_tool_permission as require_tool_permission
    from chamvi.plugin import ChamviPlugin as ChamviPlugin
    from chamvi.providers import ModelRegistry as ModelRegistry
    from chamvi.providers import ScriptedModel as ScriptedModel
    from chamvi.retry import RetryPolicies as RetryPolicies
    from chamvi.run_events import RunEvent as RunEvent
    from chamvi.runtime import build_worker as build_worker
    from chamvi.schedules import AgentSchedule as AgentSchedule
    from chamvi.schedules import define_schedule as define_schedule
    from chamvi.senders import ChamviSignature as ChamviSignature
    from chamvi.senders import GitHubComments as GitHubComments
    from chamvi.senders import GitHubWebhooks as GitHubWebhooks
    from chamvi.senders import SigningScheme as SigningScheme
    from chamvi.senders import SlackEvents as SlackEvents
    from chamvi.senders import SlackMessages as SlackMessages
    from chamvi.senders import StandardWebhooks as StandardWebhooks
    from chamvi.senders import StripeWebhooks as StripeWebhooks
    from chamvi.senders import WebhookAnswer as WebhookAnswer
    from chamvi.senders import WebhookEvent as WebhookEvent
    from chamvi.senders import WebhookRequest as WebhookRequest
    from chamvi.senders import WebhookScheme as WebhookScheme
    from chamvi.state import AgentState as AgentState
    from chamvi.tool_factory import ToolFactoryContext as ToolFactoryContext
    from chamvi.tools import EffectSpec as EffectSpec
    from chamvi.tools import Tool as Tool
    from chamvi.tools import ToolContext as ToolContext
    from chamvi.tools import Trust as Trust
    from chamvi.tools import approve as approve
    from chamvi.tools import effect_marker as effect_marker
    from chamvi.tools import effect_tool as effect_tool
    from chamvi.tools import tool as tool
    from chamvi.webhooks import WebhookChannel as WebhookChannel
    from chamvi.webhooks import WebhookReply as WebhookReply
    from chamvi.webhooks import webhook_channel as webhook_channel
    from chamvi.worker_state import AppRuntime as AppRuntime
    from chamvi.wrapped_tools import ToolsForRun as ToolsForRun
    from chamvi.wrapped_tools import wrap_tools_for_run as wrap_tools_for_run

_PUBLIC: dict[str, tuple[str, ...]] = {
    "chamvi.agent_revisions": ("AgentRevisionStore", "ObjectRevisionStore"),
    "chamvi.agents": ("Agent", "AgentHooks", "AgentTrust", "Budget", "ToolCallInfo", "define_agent"),
    "chamvi.app": ("ActivityTimeouts", "App"),
    "chamvi.approval_tokens": ("ApprovalTokens",),
    "chamvi.artifacts": (
        "ArtifactStore",
        "Attachment",
        "RunArtifacts",
        "artifact_file_part",
        "is_artifact_media_type",
    ),
    "chamvi.channels": (
        "Channel",
        "ChannelContext",
        "ChannelMessage",
        "ChannelSubscription",
        "InboundEvent",
        "LifecycleChannel",
        "console_channel",
    ),
    "chamvi.client": ("ChamviClient", "DispatchResult", "resume"),
    "chamvi.context": ("ContextKey", "define_context_key", "inject", "try_inject"),
    "chamvi.conversations.client": ("SentMessage",),
    "chamvi.conversations.recall": ("RecallPolicy",),
    "chamvi.dynamic_agents": ("RuntimeAgents",),
    "chamvi.errors": (
        "ApprovalNotPendingError",
        "ApprovalTokenExpiredError",
        "ApprovalTokenInvalidError",
        "ArtifactNotFoundError",
        "AttachmentTooLargeError",
        "BackgroundError",
        "BudgetExceededError",
        "ChamviError",
        "ChamviValidationError",
        "ChannelDeliveryError",
        "ChannelNotFoundError",
        "ChannelUnavailableError",
        "ContextNotProvidedError",
        "ErrorCode",
        "FatalToolError",
        "IdleTimeoutError",
        "IncompleteResponseError",
        "InvalidAgentDefinitionError",
        "InvalidInputError",
        "InvalidRunStateError",
        "InvalidScheduleError",
        "ModelError",
        "ProviderUnavailableError",
        "RunNotFoundError",
        "RunTimeoutError",
        "ScheduleNotFoundError",
        "ToolDeniedError",
        "ToolNotAllowedError",
        "ToolResultTooLargeError",
        "ValidationIssue",
    ),
    "chamvi.extraction": ("extract",),
    "chamvi.knowledge": (
        "define_source",
        "folder",
        "git",
        "knowledge_collection",
        "knowledge_tools",
        "urls",
    ),
    "chamvi.knowledge.collections": ("ManagedRoutes",),
    "chamvi.knowledge.remote": ("CollectionSearch",),
    "chamvi.knowledge_standalone": ("Knowledge",),
    "chamvi.mcp": ("McpServer", "mcp_server", "mcp_tools"),
    "chamvi.mcp.knowledge": ("knowledge_http_app", "knowledge_server"),
    "chamvi.models": (
        "AgentDefinition",
        "AgentInfo",
        "AgentPutResult",
        "ApprovalDecision",
        "Artifact",
        "ContentPart",
        "DispatchSettings",
        "FilePart",
        "ImagePart",
        "Invoker",
        "Message",
        "ModelSettings",
        "NamedTool",
        "ProviderOptions",
        "RunStatus",
        "RunView",
        "ScheduleView",
        "TextPart",
        "TriggerEnvelope",
    ),
    "chamvi.permissions": ("PolicyRun", "has_permission", "matches_permission", "require_tool_permission"),
    "chamvi.plugin": ("ChamviPlugin",),
    "chamvi.providers": ("ModelRegistry", "ScriptedModel"),
    "chamvi.retry": ("RetryPolicies",),
    "chamvi.run_events": ("RunEvent",),
    "chamvi.runtime": ("build_worker",),
    "chamvi.schedules": ("AgentSchedule", "define_schedule"),
    "chamvi.senders": (
        "ChamviSignature",
        "GitHubComments",
        "GitHubWebhooks",
        "SigningScheme",
        "SlackEvents",
        "SlackMessages",
        "StandardWebhooks",
        "StripeWebhooks",
        "WebhookAnswer",
        "WebhookEvent",
        "WebhookRequest",
        "WebhookScheme",
    ),
    "chamvi.state": ("AgentState",),
    "chamvi.tool_factory": ("ToolFactoryContext",),
    "chamvi.tools": (
        "EffectSpec",
        "Tool",
        "ToolContext",
        "Trust",
        "approve",
        "effect_marker",
        "effect_tool",
        "tool",
    ),
    "chamvi.webhooks": ("WebhookChannel", "WebhookReply", "webhook_channel"),
    "chamvi.worker_state": ("AppRuntime",),
    "chamvi.wrapped_tools": ("ToolsForRun", "wrap_tools_for_run"),
}
_EXPORTS: dict[str, str] = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chamvi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
