"""One error hierarchy, each class with the stable code the seeds give it.

Codes travel through Temporal as the ``type`` of an ``ApplicationError`` so a failed run
reads the same in the Temporal UI, in ``chamvi runs show`` and in the HTTP API.
"""

from __future__ import annotations

from typing import ClassVar


class ChamviError(Exception):
    """Base of every error chamvi raises on purpose."""

    code: ClassVar[str] = "chamvi_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidAgentDefinitionError(ChamviError):
    code = "invalid_agent_definition"


class InvalidAppError(ChamviError):
    code = "invalid_app"


class InvalidRunStateError(ChamviError):
    code = "invalid_run_state"


class InvalidInputError(ChamviError):
    """A caller passed a value chamvi refuses (a dispatch field, an approval answer)."""

    code = "invalid_input"


class RunNotFoundError(ChamviError):
    code = "run_not_found"


class AgentNotFoundError(ChamviError):
    code = "agent_not_found"


class ModelNotFoundError(ChamviError):
    code = "model_not_found"


class ModelError(ChamviError):
    """The model provider refused a request for good (a 4xx other than 408/409/429)."""

    code = "model_error"


class BudgetExceededError(ChamviError):
    code = "budget_exceeded"


class TimeoutError(ChamviError):
    code = "timeout"


class ValidationError(ChamviError):
    code = "validation_error"


class IncompleteResponseError(ChamviError):
    code = "incomplete_response"


class FatalToolError(ChamviError):
    """Raised by a tool to fail the whole run instead of reporting a tool error to the model."""

    code = "fatal_tool_error"


class ToolNotAllowedError(ChamviError):
    code = "tool_not_allowed"


class ToolDeniedError(ChamviError):
    """A gate refused a tool call; reported to the model as a tool error, never fatal."""

    code = "tool_denied"


class ChannelNotFoundError(ChamviError):
    code = "channel_not_found"


class ContextNotProvidedError(ChamviError):
    """``inject()`` found no value for a context key (names the key only)."""

    code = "context_not_provided"


class NotFoundError(ChamviError):
    """A collection or document that does not exist (404 over HTTP)."""

    code = "not_found"


class ConflictError(ChamviError):
    """A request that contradicts what exists (409 over HTTP): a declared name, a missing default."""

    code = "conflict"


class ApprovalNotPendingError(ChamviError):
    """An approval answer named an approval the run is not waiting on (stale, unknown or used)."""

    code = "approval_not_pending"


ERROR_CLASSES: tuple[type[ChamviError], ...] = (
    InvalidAgentDefinitionError,
    InvalidAppError,
    InvalidRunStateError,
    InvalidInputError,
    RunNotFoundError,
    AgentNotFoundError,
    ModelNotFoundError,
    ModelError,
    BudgetExceededError,
    TimeoutError,
    ValidationError,
    IncompleteResponseError,
    FatalToolError,
    ToolNotAllowedError,
    ToolDeniedError,
    ChannelNotFoundError,
    ApprovalNotPendingError,
    NotFoundError,
    ConflictError,
    ContextNotProvidedError,
)

ErrorCode: dict[str, str] = {cls.__name__: cls.code for cls in ERROR_CLASSES}
"""The code of every error above, by class name (the seed's ``ErrorCode`` object)."""
