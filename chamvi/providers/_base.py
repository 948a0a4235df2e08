"""The contract every chat model keeps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from chamvi.errors import ArtifactNotFoundError
from chamvi.models import Artifact, FilePart, ImagePart, Message, ModelResponse


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
    """One model call: the agent's instructions followed by the run's transcript.

    ``messages`` may hold content parts (``chamvi.models.parts``); the bytes of those that reference
    artifacts are in ``files``, read for this call only (:meth:`data_of`).
    """

    run_id: str
    agent: str
    step: int
    messages: list[Message]
    tools: list[ToolSchema] = field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    attachments: list[AttachedFile] = field(default_factory=list)
    """The run's attachments: content parts of the run's first user message (the trigger's)."""
    transcript_start: int = 0
    """Where the run's own transcript begins in ``messages``: after the configured instructions."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """The bytes of every artifact a part of ``messages`` references, by artifact id; never stored."""
    on_delta: OnDelta | None = None
    """Where a streaming model sends its deltas while it writes; they are never stored."""

    def data_of(self, part: ImagePart | FilePart) -> bytes | None:
        """The bytes of an image or file part: inline, or its artifact's; None for a URL.

        Raises:
            ArtifactNotFoundError: the part references an artifact this call was not given.
        """
        if part.data is not None:
            return part.data
        if part.artifact is None:
            return None
        data = self.files.get(part.artifact.id)
        if data is None:
            attached = next((a for a in self.attachments if a.artifact.id == part.artifact.id), None)
            if attached is None:
                raise ArtifactNotFoundError(f"artifact {part.artifact.id!r} was not read for this model call")
            data = attached.data
        return data

    def system_prefix(self) -> tuple[list[str], list[Message]]:
        """The leading system messages' texts (a provider's instructions), and the messages after them.

        For providers that take instructions apart from the messages; a later system message stays
        in place among the rest.
        """
        count = next((i for i, m in enumerate(self.messages) if m.role != "system"), len(self.messages))
        return [m.content or "" for m in self.messages[:count]], self.messages[count:]

    def trigger_index(self) -> int | None:
        """The index in ``messages`` of the run's first user message, which carries the attachments."""
        return next(
            (i for i, m in enumerate(self.messages) if m.role == "user" and i >= self.transcript_start),
            None,
        )


class ChatModel(Protocol):
    async def complete(self, request: ChatRequest) -> ModelResponse: ...
