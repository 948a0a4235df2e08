"""The contract every chat model keeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from chamvi.models import Artifact, Message, ModelResponse


@dataclass(frozen=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]


DeltaKind = Literal["text", "reasoning"]
OnDelta = Callable[[DeltaKind, str], None]
"""Called with each piece of text or reasoning as the model writes it (a streaming model only)."""


@dataclass(frozen=True)
class AttachedFile:
    """An attachment's bytes, read from the artifact store for one model call and never stored."""

    artifact: Artifact
    data: bytes


@dataclass(frozen=True)
class ChatRequest:
    """One model call: the agent's instructions followed by the run's transcript."""

    run_id: str
    agent: str
    step: int
    messages: list[Message]
    tools: list[ToolSchema] = field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    attachments: list[AttachedFile] = field(default_factory=list)
    """The run's attachments: content parts of the run's first user message (the trigger's)."""
    transcript_start: int = 0
    """Where the run's own transcript begins in ``messages``: after the configured instructions and,
    for a turn of a conversation, the recalled messages."""
    on_delta: OnDelta | None = None
    """Where a streaming model sends its deltas while it writes; they are never stored."""


class ChatModel(Protocol):
    async def complete(self, request: ChatRequest) -> ModelResponse: ...
