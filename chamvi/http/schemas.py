"""What the HTTP API reads and answers: request bodies, representations and the error shape."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from chamvi._constants import (
    CONVERSATION_MESSAGE_MAX_CHARS,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    TRIGGER_KEY_MAX_LENGTH,
)
from chamvi.approval_tokens import TOKEN_MAX_CHARS
from chamvi.errors import ValidationIssue
from chamvi.knowledge.managed import MAX_CONTENT_CHARS, DocumentPage
from chamvi.models import Artifact, ModelSettings, RunSummary
from chamvi.models.conversations import ConversationSummary
from chamvi.models.knowledge import CollectionMeta, DocumentEntry

MAX_JSON_DEPTH = 64
_INT64 = (-(2**63), 2**63 - 1)

DocumentStatus = Literal["pending", "ready", "failed"]


def check_json(value: Any, what: str, *, int64: bool = False) -> Any:
    """Refuses what JSON or the stores cannot carry, so a bad body is a 422 rather than a failed write.

    Refused: NaN/Infinity, lone surrogates, nesting deeper than 64 levels, and (``int64``) integers
    a Qdrant payload cannot hold.

    Raises:
        ValueError: naming ``what`` and the problem (pydantic turns it into a validation error).
    """

    def walk(item: Any, level: int) -> None:
        if level > MAX_JSON_DEPTH:
            raise ValueError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            for child in item.values():
                walk(child, level + 1)
        elif isinstance(item, list):
            for child in item:
                walk(child, level + 1)
        elif int64 and isinstance(item, int) and not _INT64[0] <= item <= _INT64[1]:
            raise ValueError(f"{what} holds an integer outside the signed 64-bit range")

    walk(value, 0)
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} holds invalid Unicode (a lone surrogate)") from None
    except ValueError:
        raise ValueError(f"{what} holds NaN or Infinity, which JSON cannot carry") from None
    return value


def _check_text(value: str | None, field: str) -> str | None:
    if value is not None:
        check_json(value, field)
    return value


class ErrorDetail(BaseModel):
    """The machine-readable code and the human message of an error answer."""

    code: str = Field(description="A stable code: unauthorized, forbidden, not_found, ...")
    message: str = Field(description="What went wrong and what to do, for a person")
    issues: list[ValidationIssue] | None = Field(
        default=None,
        description="A validation_error's field-by-field problems (path, message, code), when known",
    )


class ErrorBody(BaseModel):
    """The shape of every non-2xx answer."""

    error: ErrorDetail


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- knowledge --------------------------------------------------------------------------------


class CreateCollection(_Body):
    """Body of ``POST /knowledge/collections``: the name of a new managed collection."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "tickets"}]})

    name: str = Field(
        max_length=NAME_MAX_LENGTH,
        pattern=NAME_PATTERN,
        description="Lowercase letters and digits in words joined by single '-', at most 64 characters",
    )

    @field_validator("name")
    @classmethod
    def _unicode(cls, value: str) -> str:
        check_json(value, "name")
        return value


class PutDocument(_Body):
    """Body of ``PUT /knowledge/collections/{name}/documents/{id}``: one document to store and embed."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "content": "Exports over 10 000 rows time out ...",
                    "title": "Export timeout",
                    "source": "https://tracker.example.com/T-1042",
                    "metadata": {"priority": "high"},
                }
            ]
        },
    )

    content: str = Field(max_length=MAX_CONTENT_CHARS, description="At most 1 048 576 characters")
    title: str | None = None
    source: str | None = Field(default=None, description="Where the document comes from, e.g. its URL")
    metadata: dict[str, Any] | None = Field(default=None, description="A plain JSON object")

    @field_validator("content", "title", "source")
    @classmethod
    def _unicode(cls, value: str | None, info: Any) -> str | None:
        return _check_text(value, info.field_name)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_json(value, "metadata", int64=True)
        return value


class PutResult(BaseModel):
    """Answer of a document PUT: whether the content waits to be embedded or was embedded already."""

    status: DocumentStatus = Field(
        description="pending: stored, embedded in the background; ready/failed: the same content was "
        "already embedded (or is already pending)"
    )


class CollectionOut(BaseModel):
    """A knowledge collection as the API shows it: status, embedding model, generation and counts."""

    name: str
    kind: Literal["declared", "managed"]
    status: Literal["pending", "ready", "stale", "orphaned"]
    model: str | None = Field(description="The embedding model of the generation searches read")
    generation: int | None
    documents: int
    passages: int
    last_pass: datetime | None
    error: str | None
    next_attempt: datetime | None = Field(description="When a failed pass is tried again")
    trusted: bool
    skipped: int = Field(
        0,
        description="Entries the last pass left out: symbolic links, files that are no regular file, too "
        "large or not UTF-8, invalid or repeated documents (the worker's log names each)",
    )

    @classmethod
    def of(cls, meta: CollectionMeta) -> CollectionOut:
        """The public fields of ``meta``; the building generation and pass bookkeeping stay inside."""
        return cls(
            name=meta.name,
            kind=meta.kind,
            status=meta.status.value,
            model=meta.model or meta.managed_model,
            generation=meta.generation,
            documents=meta.documents,
            passages=meta.passages,
            last_pass=meta.last_pass,
            error=meta.error,
            next_attempt=meta.next_attempt,
            trusted=meta.trusted,
            skipped=meta.last_stats.skipped if meta.last_stats is not None else 0,
        )


class CollectionList(BaseModel):
    """Answer of ``GET /knowledge/collections``: every collection, declared and managed."""

    data: list[CollectionOut]


class DocumentOut(BaseModel):
    """A document of a collection's registry as the API shows it: its state and fields, never its content."""

    id: str
    status: DocumentStatus
    error: str | None = Field(description="The provider's refusal, when failed")
    title: str | None
    source: str | None
    metadata: dict[str, Any] | None
    updated_at: datetime | None

    @classmethod
    def of(cls, entry: DocumentEntry) -> DocumentOut:
        """The registry entry's fields of the same names; its content and hash stay inside."""
        return cls.model_validate(entry, from_attributes=True)


class PageMeta(BaseModel):
    """Where a page of a listing sits: the total and the ``limit`` and ``offset`` that were asked for."""

    total: int
    limit: int
    offset: int


class DocumentList(BaseModel):
    """Answer of ``GET /knowledge/collections/{name}/documents``: one page of documents."""

    data: list[DocumentOut]
    meta: PageMeta

    @classmethod
    def of(cls, page: DocumentPage) -> DocumentList:
        """The answer for one page of registry entries, as ``ManagedCollections.documents`` returned it."""
        return cls(
            data=[DocumentOut.of(e) for e in page.data],
            meta=PageMeta(total=page.total, limit=page.limit, offset=page.offset),
        )


# ---- runs -------------------------------------------------------------------------------------


_Key = Field(default=None, min_length=1, max_length=TRIGGER_KEY_MAX_LENGTH)


class ArtifactList(BaseModel):
    """Answer of ``GET /runs/{run_id}/artifacts``: the run's artifacts in order."""

    data: list[Artifact]


class DispatchRun(_Body):
    """Body of ``POST /runs``: the agent to run, its payload, and the keys that dedupe or queue runs."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "agent": "support",
                    "payload": {"question": "Where is my refund?"},
                    "idempotency_key": "mail-4711",
                }
            ]
        },
    )

    agent: str = Field(
        max_length=NAME_MAX_LENGTH, pattern=NAME_PATTERN, description="The agent's name", examples=["support"]
    )
    payload: Any = Field(default=None, description="Any JSON value; the run's first message carries it")
    channel: str | None = _Key
    address: str | None = _Key
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=TRIGGER_KEY_MAX_LENGTH,
        description="A redelivery with the same key (from the same token) answers 200 with the same run",
    )
    concurrency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=TRIGGER_KEY_MAX_LENGTH,
        description="Runs with the same key run one at a time, in dispatch order",
    )
    model_settings: ModelSettings | None = Field(
        default=None,
        description="This run's own model settings, over the agent's: only those the agent lets a "
        "dispatch set (by default temperature, top_p, stop, seed), within its caps",
    )

    @field_validator("agent", "channel", "address", "idempotency_key", "concurrency_key")
    @classmethod
    def _unicode(cls, value: str | None, info: Any) -> str | None:
        return _check_text(value, info.field_name)

    @field_validator("payload")
    @classmethod
    def _payload(cls, value: Any) -> Any:
        return check_json(value, "payload")


class DispatchResultOut(BaseModel):
    """Answer of ``POST /runs``: the run's id, and whether this request started it."""

    run_id: str
    created: bool = Field(description="False for a redelivery: the idempotency key matched this run")


class RunListMeta(BaseModel):
    """Where a page of the run listing sits: the ``limit`` and ``offset`` that were asked for."""

    limit: int
    offset: int


class RunList(BaseModel):
    """Answer of ``GET /runs``: one page of runs, newest first."""

    data: list[RunSummary]
    meta: RunListMeta


class ApproveRun(_Body):
    """Body of ``POST /runs/{run_id}/approve``: a person's answer to the approval the run waits on."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"approval_id": "0:call_0_0:0", "approved": True, "reason": "checked"}]
        },
    )

    approval_id: str = Field(min_length=1, max_length=1000, description="The run's waiting.approval_id")
    approved: bool
    reason: str | None = Field(default=None, max_length=10_000)

    @field_validator("approval_id", "reason")
    @classmethod
    def _unicode(cls, value: str | None, info: Any) -> str | None:
        return _check_text(value, info.field_name)


class ApprovalToken(_Body):
    """Body of ``POST /approvals/view``: an approval token from a channel's request."""

    token: str = Field(
        min_length=1, max_length=TOKEN_MAX_CHARS, description="The token, as the link carries it"
    )


class AnswerByToken(ApprovalToken):
    """Body of ``POST /approvals/answer``: the answer to the approval a token names."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"token": "ca1.WyJydW4t....3q0", "approved": True, "reason": "ok"}]},
    )

    approved: bool
    reason: str | None = Field(default=None, max_length=10_000)

    @field_validator("reason")
    @classmethod
    def _unicode(cls, value: str | None) -> str | None:
        return _check_text(value, "reason")


class ApprovalOut(BaseModel):
    """Answer of ``POST /runs/{run_id}/approve`` and ``POST /approvals/answer``: what was answered."""

    run_id: str
    approval_id: str
    approved: bool


class CancelOut(BaseModel):
    """Answer of ``POST /runs/{run_id}/cancel``: cancellation was requested; the run settles later."""

    run_id: str
    status: Literal["cancelling"] = "cancelling"


# ---- conversations ----------------------------------------------------------------------------


class SendMessage(_Body):
    """Body of ``POST /conversations/{agent}/{id}/messages``: a person's message."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"text": "Can I return a delivered order?", "message_id": "m-1"}]},
    )

    text: str = Field(min_length=1, max_length=CONVERSATION_MESSAGE_MAX_CHARS)
    message_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=TRIGGER_KEY_MAX_LENGTH,
        description="A resend with the same id answers 200 with the same turn; by default a new id",
    )

    @field_validator("text", "message_id")
    @classmethod
    def _unicode(cls, value: str | None, info: Any) -> str | None:
        return _check_text(value, info.field_name)


class MessageOut(BaseModel):
    """Answer of ``POST /conversations/{agent}/{id}/messages``: the turn the message is."""

    conversation: str
    run_id: str = Field(description="The turn's run: it starts once the turns before it have ended")
    turn: int
    created: bool = Field(description="False for a resent message id: the turn it started before")


class ChatAgents(BaseModel):
    """Answer of ``GET /conversations``: the agents one can talk with."""

    agents: list[str]


class ConversationList(BaseModel):
    """Answer of ``GET /conversations/{agent}``: the agent's conversations, latest first."""

    data: list[ConversationSummary]


class ConversationDeleted(BaseModel):
    """Answer of ``DELETE /conversations/{agent}/{id}``."""

    agent: str
    id: str
    executions: int = Field(description="Temporal executions deleted (the conversation's and its turns')")
