"""Chat models behind ``<provider>/<model id>`` refs, resolved through one registry.

Real providers (``openai/...``), the offline ``local/...`` demo model and the scripted models of
tests all register here, so a test exercises the same resolution path as production.
"""

from chamvi.providers._base import (
    ChatModel,
    ChatRequest,
    DeltaKind,
    OnDelta,
    ToolSchema,
)
from chamvi.providers._registry import ModelRegistry, default_registry
from chamvi.providers.local import LocalChatModel
from chamvi.providers.openai import OpenAIChatModel, OpenAIProvider
from chamvi.providers.scripted import ScriptedModel, ScriptedTurn, call, calls, reply

__all__ = [
    "ChatModel",
    "ChatRequest",
    "DeltaKind",
    "LocalChatModel",
    "ModelRegistry",
    "OnDelta",
    "OpenAIChatModel",
    "OpenAIProvider",
    "ScriptedModel",
    "ScriptedTurn",
    "ToolSchema",
    "call",
    "calls",
    "default_registry",
    "reply",
]
