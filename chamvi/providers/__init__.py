"""Chat models behind ``<provider>/<model id>`` refs, resolved through one registry.

Real providers (``openai/...``, ``anthropic/...``, named OpenAI-compatible endpoints), the offline
``local/...`` demo model and the scripted models of tests all register here, so a test exercises the
same resolution path as production.
"""

from chamvi.providers._base import (
    AttachedFile,
    ChatModel,
    ChatRequest,
    DeltaKind,
    OnDelta,
    ToolSchema,
)
from chamvi.providers._registry import ModelRegistry, NamedProvider, default_registry
from chamvi.providers.anthropic import AnthropicChatModel, AnthropicProvider
from chamvi.providers.compatible import OpenAICompatibleProvider, openai_compatible
from chamvi.providers.local import LocalChatModel
from chamvi.providers.openai import OpenAIChatModel, OpenAIProvider
from chamvi.providers.scripted import ScriptedModel, ScriptedTurn, call, calls, reply

__all__ = [
    "AnthropicChatModel",
    "AnthropicProvider",
    "AttachedFile",
    "ChatModel",
    "ChatRequest",
    "DeltaKind",
    "LocalChatModel",
    "ModelRegistry",
    "NamedProvider",
    "OnDelta",
    "OpenAIChatModel",
    "OpenAICompatibleProvider",
    "OpenAIProvider",
    "ScriptedModel",
    "ScriptedTurn",
    "ToolSchema",
    "call",
    "calls",
    "default_registry",
    "openai_compatible",
    "reply",
]
