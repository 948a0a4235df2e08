"""The contract every chat model keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from chamvi.models import Message, ModelResponse


@dataclass(frozen=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ChatRequest:
    """One model call: the agent's instructions followed by the run's transcript."""

    run_id: str
    agent: str
    step: int
    messages: list[Message]
    tools: list[ToolSchema] = field(default_factory=list)
    output_schema: dict[str, Any] | None = None


class ChatModel(Protocol):
    async def complete(self, request: ChatRequest) -> ModelResponse: ...


class ProviderHTTPError(Exception):
    """A provider answered with an HTTP error; the model activity decides whether to retry."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"model provider answered {status}: {message}")
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status in (408, 409, 429) or self.status >= 500


class ProviderConnectionError(Exception):
    """The provider could not be reached or did not answer in time; Temporal retries the call."""
