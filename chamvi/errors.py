"""One error hierarchy, each class with the stable code the seeds give it, in one table.

Codes travel through Temporal as the ``type`` of an ``ApplicationError`` so a failed run reads the
same in the Temporal UI, in ``chamvi runs show`` and in the HTTP API. Whether Temporal retries an
activity that failed with one of them is decided by the retry policies: each class says whether it
is ``retryable``, and each policy lists, as ``non_retryable_error_types``, the codes of the
non-retryable errors its activity can raise (``chamvi.retry``). Raise sites never decide.

This module is part of the shared kernel that workflows import: it loads no I/O client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


class ChamviError(Exception):
    """Base of every error chamvi raises on purpose.

    Attributes:
        code: the stable code (the ``type`` of the Temporal failure it becomes).
        retryable: whether trying the same call again may succeed (a provider that is down, a
            rate limit); deterministic mistakes are not.
        retry_after: seconds the other side asked to wait before the next attempt, when it said.
        reported: the code that raised it has logged it already (with more than the message), so the
            activity boundary does not log it again.
    """

    code: ClassVar[str] = "chamvi_error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.reported = False


# ---- definitions and runs -------------------------------------------------------------------------


class InvalidAgentDefinitionError(ChamviError):
    """An agent, tool, channel or collection definition that cannot work; the boot fails."""

    code = "invalid_agent_definition"


class InvalidAppError(ChamviError):
    """The app cannot be loaded or contradicts what is stored."""

    code = "invalid_app"


class InvalidRunStateError(ChamviError):
    """The run is in a state that does not allow the request (approving a finished run)."""

    code = "invalid_run_state"


class InvalidInputError(ChamviError):
    """A caller passed a value chamvi refuses (a dispatch field, an approval answer)."""

    code = "invalid_input"


class RunNotFoundError(ChamviError):
    """No run has this id."""

    code = "run_not_found"


class AgentNotFoundError(ChamviError):
    """The app serves no agent of this name."""

    code = "agent_not_found"


class ModelNotFoundError(ChamviError):
    """No provider resolves this model ref."""

    code = "model_not_found"


class ModelError(ChamviError):
    """The model provider refused a request for good (a 4xx other than 408/409/429)."""

    code = "model_error"


class BudgetExceededError(ChamviError):
    """The run reached its ``max_steps`` or ``max_tokens``."""

    code = "budget_exceeded"


class RunTimeoutError(ChamviError):
    """The run took longer than its budget's timeout (the seed's ``TimeoutError``)."""

    code = "timeout"


@dataclass(frozen=True)
class ValidationIssue:
    """One field-by-field problem of a validation: where, what, and which rule it broke.

    Attributes:
        path: where in the value, outermost first (``("items", 0, "amount")``); empty for the value
            itself.
        message: what is wrong, without the value (``Input should be a valid number``).
        code: the rule it broke, as the validator names it (pydantic's error type: ``missing``,
            ``int_parsing``, ...; chamvi's own checks use their own: ``media_type``).
    """

    path: tuple[str | int, ...]
    message: str
    code: str

    @property
    def where(self) -> str:
        """The path as one dotted string (``items.0.amount``), ``value`` for the value itself."""
        return ".".join(str(part) for part in self.path) or "value"


def shown(value: str) -> str:
    """``value`` as a message names it: its ``repr``, cut to 60 characters and its length when long."""
    return repr(value) if len(value) <= 80 else f"{value[:60]!r}... ({len(value)} characters)"


def validation_issues(errors: Iterable[Mapping[str, Any]]) -> tuple[ValidationIssue, ...]:
    """The issues of a pydantic ``ValidationError``: pass ``error.errors(include_input=False)``.

    Written against the plain dicts pydantic answers, so that this module loads no validator.
    """
    return tuple(
        ValidationIssue(
            path=tuple(part if isinstance(part, int) else str(part) for part in e.get("loc", ())),
            message=str(e.get("msg", "invalid")).removeprefix("Value error, "),
            code=str(e.get("type", "invalid")),
        )
        for e in errors
    )


def describe_issues(issues: Iterable[ValidationIssue]) -> str:
    """``amount: Input should be a valid number; note: Field required``: every issue, on one line."""
    return "; ".join(f"{issue.where}: {issue.message}" for issue in issues)


class ChamviValidationError(ChamviError):
    """A value does not match its schema (the seed's ``ValidationError``).

    Attributes:
        issues: the field-by-field problems (the seed's ``ValidationError.issues``), when the check
            knows them: a tool's input, a structured output, a state item, an HTTP body. Empty for
            a check of one whole value.
    """

    code = "validation_error"

    def __init__(
        self,
        message: str,
        *,
        issues: Sequence[ValidationIssue] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.issues: tuple[ValidationIssue, ...] = tuple(issues)


class IncompleteResponseError(ChamviError):
    """The model's answer was cut off or never finished."""

    code = "incomplete_response"


class FatalToolError(ChamviError):
    """Raised by a tool to fail the whole run instead of reporting a tool error to the model."""

    code = "fatal_tool_error"


class ToolNotAllowedError(ChamviError):
    """The agent's tool policy or permissions do not offer the tool to this run."""

    code = "tool_not_allowed"


class ToolDeniedError(ChamviError):
    """A gate refused a tool call; reported to the model as a tool error, never fatal."""

    code = "tool_denied"


class ToolResultTooLargeError(ChamviError):
    """A tool returned more than fits in a Temporal payload; reported to the model as a tool error."""

    code = "tool_result_too_large"


class ChannelNotFoundError(ChamviError):
    """A tool named a channel the app does not register."""

    code = "channel_not_found"


class ContextNotProvidedError(ChamviError):
    """``inject()`` found no value for a context key (names the key only)."""

    code = "context_not_provided"


class ApprovalNotPendingError(ChamviError):
    """An approval answer named an approval the run is not waiting on (stale, unknown or used)."""

    code = "approval_not_pending"


class ApprovalTokenInvalidError(ChamviError):
    """An approval token that chamvi did not sign: altered, truncated, or signed with another secret.

    Its message says nothing of the run the token names (HTTP 403).
    """

    code = "approval_token_invalid"


class ApprovalTokenExpiredError(ChamviError):
    """A genuine approval token past its expiry: the approval it answers has timed out (HTTP 410)."""

    code = "approval_token_expired"


class ArtifactNotFoundError(ChamviError):
    """A run refers to an artifact its store does not hold (deleted, or another store)."""

    code = "artifact_not_found"


class AttachmentTooLargeError(ChamviError):
    """An attachment over the size limit per attachment (HTTP 413)."""

    code = "attachment_too_large"


class NotFoundError(ChamviError):
    """A collection or document that does not exist (404 over HTTP)."""

    code = "not_found"


class ConflictError(ChamviError):
    """A request that contradicts what exists (409 over HTTP): a declared name, a missing default."""

    code = "conflict"


class PermissionDeniedError(ChamviError):
    """A token may use a route but not on this thing: ``artifacts:read:<agent>``, another agent's run."""

    code = "forbidden"


class IdleTimeoutError(ChamviError):
    """``idle()`` gave up: runs were still in progress when its timeout ran out."""

    code = "idle_timeout"


class InvalidScheduleError(ChamviError):
    """A schedule that cannot work: both or neither of cron and every, a bad cron, an unknown overlap."""

    code = "invalid_schedule"


class ScheduleNotFoundError(ChamviError):
    """No agent schedule has this id (404 over HTTP)."""

    code = "schedule_not_found"


class InvalidSkillError(InvalidAgentDefinitionError):
    """A skill that cannot be served (no front matter, a bad name, a clash, too large, not UTF-8).

    The boot and ``chamvi check`` fail with its message: one line naming the file.
    """

    code = "invalid_skill"


class SkillNotFoundError(ChamviError):
    """The run's skills hold no skill, or the skill no file, of this name (a tool error the model sees)."""

    code = "skill_not_found"


# ---- providers ------------------------------------------------------------------------------------


class ProviderUnavailableError(ChamviError):
    """A model or embedding provider that may answer later: 408, 409, 429, 5xx, or no connection.

    ``retry_after`` carries the provider's ``retry-after`` so Temporal waits as long as it asked.
    """

    code = "provider_unavailable"
    retryable = True

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status


class ProviderHTTPError(ModelError):
    """A model or embedding provider answered an HTTP error status that retrying will not change.

    One class for chat and embeddings and one rule, in :func:`provider_http_error`.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def input_refused(self) -> bool:
        """The provider refused this input (400, 413, 422): a document with it fails, others go on."""
        return self.status in INPUT_REFUSED_STATUSES


RETRYABLE_STATUSES = frozenset({408, 409, 429})
INPUT_REFUSED_STATUSES = frozenset({400, 413, 422})
"""Statuses by which a provider refuses the input itself (too long, malformed)."""


def provider_http_error(
    status: int, message: str, retry_after: float | None = None
) -> ProviderHTTPError | ProviderUnavailableError:
    """The error an HTTP error status from a model or embedding provider becomes.

    408, 409, 429 and 5xx may pass (Temporal retries, waiting ``retry_after`` when given); every
    other status is the request's fault and fails the call for good.
    """
    if status in RETRYABLE_STATUSES or status >= 500:
        return ProviderUnavailableError(message, status=status, retry_after=retry_after)
    return ProviderHTTPError(status, message)


# ---- MCP servers ----------------------------------------------------------------------------------


class McpServerUnavailableError(ChamviError):
    """An MCP server could not be reached, or went away during a listing or a call.

    Retryable: listing a server's tools is tried again under the tool retry policy. A tool call that
    meets it is a tool error the model sees, never retried (the rule for every tool).
    """

    code = "mcp_server_unavailable"
    retryable = True


class McpHostNotAllowedError(ChamviError):
    """An MCP server over HTTP would listen beyond loopback without naming the hosts it answers."""

    code = "mcp_host_not_allowed"


class McpToolError(ChamviError):
    """An MCP server answered a tool call with an error result (``isError``)."""

    code = "mcp_tool_error"


# ---- channels -------------------------------------------------------------------------------------


class ChannelUnavailableError(ChamviError):
    """A channel's receiver may accept the message later: it answered 408, 429 or 5xx, or was unreachable.

    Retryable: the tool runner lets it fail the tool activity, so Temporal delivers again with backoff
    (emits already sent are recorded in the run and not sent twice).
    """

    code = "channel_unavailable"
    retryable = True


class ChannelDeliveryError(ChamviError):
    """A channel's receiver refused the message for good (a 4xx other than 408 and 429): a tool error."""

    code = "channel_delivery_failed"


class WebhookSignatureError(ChamviError):
    """An inbound webhook delivery without a valid signature (HTTP 401)."""

    code = "invalid_signature"


class StaleDeliveryError(ChamviError):
    """An inbound webhook delivery whose timestamp is outside the channel's tolerance window (HTTP 409).

    A replay of an old, validly signed delivery is refused this way.
    """

    code = "stale_delivery"


# ---- knowledge ------------------------------------------------------------------------------------


class KnowledgeNotReadyError(ChamviError):
    """A search named a collection that has no complete generation yet, or is orphaned."""

    code = "knowledge_not_ready"


class InvalidDocumentError(ChamviError):
    """A source yielded an item that cannot be indexed; the pass reports it and skips it."""

    code = "invalid_document"


class KnowledgePassError(ChamviError):
    """A pass that failed and will be tried again on the backoff."""

    code = "knowledge_pass_failed"
    retryable = True


class IndexUnavailableError(ChamviError):
    """The knowledge index (Qdrant) cannot be opened or read: the folder is taken, the server is down."""

    code = "knowledge_store_unavailable"
    retryable = True


class StoreDamagedError(ChamviError):
    """A collection of the embedded store whose files are damaged: it is not served until rebuilt.

    Not retryable: its files stay damaged until someone rebuilds it. The rest of the store is served.
    """

    code = "store_damaged"


# ---- the curated knowledge base (the wiki) --------------------------------------------------------
# Their messages are written for the model that called the tool: the knowledge tools hand them on as
# tool errors, word for word, so each one says what is wrong and what to do instead.


class KnowledgeStoreError(ChamviError):
    """Base of the errors a curated knowledge store raises on purpose."""

    code = "knowledge_store_error"


class InvalidPageError(KnowledgeStoreError):
    """A bad id, slug, type, title or field: nothing was written."""

    code = "invalid_page"


class PageNotFoundError(KnowledgeStoreError):
    """No page has this id."""

    code = "page_not_found"


class PageExistsError(KnowledgeStoreError):
    """A create named an id that is taken (pages are never deleted, so a retired one counts too)."""

    code = "page_exists"


class MissingLinksError(KnowledgeStoreError):
    """Content links to pages that do not exist; ``missing`` names every one of them."""

    code = "missing_links"

    def __init__(self, message: str, missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing: tuple[str, ...] = tuple(missing)


class EditMismatchError(KnowledgeStoreError):
    """``edit`` found its ``old_text`` no time or more than once."""

    code = "edit_mismatch"


class PageStatusError(KnowledgeStoreError):
    """The page's status forbids the change (editing a retired page, retiring it twice)."""

    code = "page_status"


class PageFormatError(KnowledgeStoreError):
    """A file in the store's folder cannot be read as a page (e.g. front matter it cannot parse)."""

    code = "page_format"


class LogUnavailableError(KnowledgeStoreError):
    """The store cannot show its log (``recent_log`` is optional)."""

    code = "log_unavailable"


# ---- processes ------------------------------------------------------------------------------------


class BackgroundError(ChamviError):
    """An error with no caller to throw to, as ``App(on_error=...)`` receives it (the seed's ``onError``).

    Attributes:
        source: what failed: ``channel.start``, ``channel.stop``, ``listener``, ``schedules``,
            ``collections`` or ``knowledge`` (a failed pass, retried on its backoff).
        cause: the error it raised.
    """

    code = "background_error"

    def __init__(self, message: str, *, source: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.cause = cause


class DevStackError(ChamviError):
    """The local stack could not start: no ``temporal`` binary, a port in use, a server that died."""

    code = "dev_stack_error"


class InvalidTokensError(ChamviError):
    """``CHAMVI_TOKENS`` cannot be read; the message names the item and field, never a token value."""

    code = "invalid_tokens"


class InfrastructureUnavailableError(ChamviError):
    """Chamvi's own bookkeeping in a tool call could not reach its server (``chamvi._infrastructure``).

    The Temporal server (the run's recorded effects, an emit's record, a run ``ctx.dispatch`` starts),
    the state store or the artifact store did not answer. Retryable: the tool runner lets it fail the
    tool activity, so Temporal runs the call again once they are back, and the model never reads it.
    """

    code = "infrastructure_unavailable"
    retryable = True


class ApiPortError(ChamviError):
    """The HTTP API's port cannot be bound."""

    code = "api_port_unavailable"


class UnavailableError(ChamviError):
    """Something the HTTP API needs did not answer in time (503): Temporal, or a run's worker."""

    code = "unavailable"
    retryable = True


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
    RunTimeoutError,
    ChamviValidationError,
    IncompleteResponseError,
    FatalToolError,
    ToolNotAllowedError,
    ToolDeniedError,
    ToolResultTooLargeError,
    ChannelNotFoundError,
    ApprovalNotPendingError,
    ApprovalTokenInvalidError,
    ApprovalTokenExpiredError,
    ArtifactNotFoundError,
    AttachmentTooLargeError,
    NotFoundError,
    ConflictError,
    IdleTimeoutError,
    InvalidScheduleError,
    ScheduleNotFoundError,
    ContextNotProvidedError,
    ProviderUnavailableError,
    McpServerUnavailableError,
    McpToolError,
    ChannelUnavailableError,
    ChannelDeliveryError,
    WebhookSignatureError,
    StaleDeliveryError,
    KnowledgeNotReadyError,
    InvalidDocumentError,
    KnowledgePassError,
    IndexUnavailableError,
    StoreDamagedError,
    KnowledgeStoreError,
    InvalidPageError,
    PageNotFoundError,
    PageExistsError,
    MissingLinksError,
    EditMismatchError,
    PageStatusError,
    PageFormatError,
    LogUnavailableError,
    DevStackError,
    InvalidTokensError,
    InfrastructureUnavailableError,
    ApiPortError,
    UnavailableError,
    BackgroundError,
)
"""The table: one class per code (subclasses that only add fields, like ``ProviderHTTPError``, share
their parent's code)."""

KNOWLEDGE_STORE_ERRORS: tuple[type[KnowledgeStoreError], ...] = tuple(
    cls for cls in ERROR_CLASSES if issubclass(cls, KnowledgeStoreError)
)

ErrorCode: dict[str, str] = {cls.__name__: cls.code for cls in ERROR_CLASSES}
"""The code of every error above, by class name (the seed's ``ErrorCode`` object)."""
