"""What is known of a knowledge collection and its documents: small, serialisable records.

``CollectionMeta`` is stored in Qdrant (so every process reads the same) and mirrored in the
collection workflow's state after each pass (so ``chamvi knowledge list`` needs no Qdrant access).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field


class CollectionStatus(StrEnum):
    """Whether searches can read a collection, and why not.

    ``stale``: searches read a generation of an older model or chunker until a new one is complete;
    ``orphaned``: no longer declared by the app, kept (and searched by no agent) until deleted.
    """

    PENDING = "pending"
    READY = "ready"
    STALE = "stale"
    ORPHANED = "orphaned"


class PassStats(BaseModel):
    """Counts of one indexing pass; they travel through history, the documents never do."""

    read: int = 0
    unchanged: int = 0
    embedded: int = 0
    passages: int = 0
    deleted: int = 0
    skipped: int = 0
    """Entries left out: every problem a source reported (a link, a FIFO, a file too large or not
    UTF-8) and every item the pass refused (invalid, or an id seen twice)."""
    failed: int = 0
    not_read: int = 0
    """Unchanged documents a source did not even read, their version being the stored one (a
    folder's files by size and times); counted in ``unchanged`` too."""
    embedding_calls: int = 0
    incomplete: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    """Why documents were skipped or failed, the first 20 (a PDF past its page limit, say): the
    reasons travel through history with the counts, the worker's log holds them all."""

    def line(self) -> str:
        """The counts in one line, as ``chamvi knowledge sync`` prints them and a pass workflow shows them."""
        text = (
            f"{self.read} read, {self.unchanged} unchanged, {self.embedded} embedded "
            f"({self.passages} passages), {self.deleted} deleted, {self.skipped} skipped, "
            f"{self.failed} failed, {self.embedding_calls} embedding call(s)"
        )
        if self.incomplete:
            text += f"; incomplete read: {'; '.join(self.incomplete)}"
        if self.problems:
            text += f"; left out: {'; '.join(self.problems)}"
        return text


class CollectionMeta(BaseModel):
    """The state of one knowledge collection: its generations, model, chunker and last pass."""

    name: str
    kind: Literal["declared", "managed"] = "declared"
    status: CollectionStatus = CollectionStatus.PENDING
    trusted: bool = True
    model: str | None = None
    """The model of the generation searches read."""
    chunker: int | None = None
    sparse: int | None = None
    """The sparse encoder version of the generation searches read (``chamvi.knowledge.sparse``): a
    hybrid generation keeps a BM25 vector beside each dense one. None: dense only (every generation
    written before hybrid search)."""
    generation: int | None = None
    building: int | None = None
    """A generation being written for ``building_model`` while searches read ``generation``."""
    building_model: str | None = None
    building_chunker: int | None = None
    building_sparse: int | None = None
    managed_model: str | None = None
    """A managed collection's model: set at creation, changed by a sync when the default changed."""
    next_generation: int = 1
    passes: int = 0
    """Passes started; each marks the registry entries its read saw, so what it did not see is gone."""
    documents: int = 0
    passages: int = 0
    last_pass: datetime | None = None
    last_stats: PassStats | None = None
    error: str | None = None
    next_attempt: datetime | None = None

    def allocate_generation(self) -> int:
        """A generation number never used before by this collection."""
        number = self.next_generation
        self.next_generation += 1
        return number


class DocumentEntry(BaseModel):
    """One document of a collection's registry."""

    id: str
    hash: str
    generation: int | None = None
    status: Literal["pending", "ready", "failed"] = "pending"
    error: str | None = None
    passages: int = 0
    title: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    trusted: bool = True
    content: str | None = None
    """Kept for managed collections only, so a new generation can be embedded without the sender."""
    updated_at: datetime | None = None
    version: str | None = None
    """The document's ``version`` when it was read (a file's size and times): a source that finds
    it unchanged need not read the document again."""


class DocumentListHeader(BaseModel):
    """Which pages make up a declared collection's document list (``chamvi.knowledge._listing``)."""

    generation: int
    """The generation whose passages the listed documents have (their registry points too)."""
    clean: bool
    """No pass has written a document the pages may not name since they were written."""
    pages: list[str]
    documents: int
    """How many ids the pages hold together."""


class CollectionInput(BaseModel):
    """Input of the ``KnowledgeCollection`` workflow (``knowledge:<name>``)."""

    name: str
    sync: bool = True
    meta: CollectionMeta | None = None
    failures: int = 0
    resync: timedelta | None = None
    """The collection's ``resync``, as the last worker to start declared it."""
    last_success: datetime | None = None
    """When the last successful pass ended: the next resync is due ``resync`` after it."""
    pass_count: int = 0
    """Passes the runs before this one made (a run continues as new): numbers the pass workflows."""


class SyncSignal(BaseModel):
    """The payload of a collection's ``sync`` signal; a request without one is an ordinary request."""

    start: bool = False
    """Sent by a worker as it starts: its first attempt skips a backoff under way (the seed's rule),
    and it declares ``resync`` as that worker's app has it."""
    resync: timedelta | None = None


class PassRequest(BaseModel):
    """Input of the ``chamvi.knowledge_pass`` activity: one indexing pass of one collection."""

    name: str
    failures: int = 0
    """Failed passes in a row before this one (shown in the pass's telemetry)."""
    retry_in: timedelta | None = None
    """The collection workflow's delay before the next attempt should this pass fail, which the pass
    stores as the collection's ``next_attempt`` for every replica and ``chamvi knowledge list``; the
    workflow decides it once (None from a workflow recorded before it: stored without a time)."""


class PassResult(BaseModel):
    """Result of the ``KnowledgePass`` workflow: the pass's counts and the collection after it."""

    stats: PassStats
    meta: CollectionMeta


class CollectionState(BaseModel):
    """What the collection workflow answers to the ``state`` query."""

    name: str
    running: bool = False
    queued: bool = False
    passes: int = 0
    failures: int = 0
    meta: CollectionMeta | None = None
    error: str | None = None
    next_attempt: datetime | None = None
    last_success: datetime | None = None
    """When the last successful pass ended (workflow time)."""
    next_resync: datetime | None = None
    """When the sources are read again unasked: ``resync`` after the last successful pass."""
    pass_id: str | None = None
    """The workflow id of the running pass, or of the last one this run of the collection's workflow
    made (``knowledge-pass:<name>:<chain>:<n>``); None before, and for passes made as activities."""


class SyncRequest(BaseModel):
    """Input of the ``KnowledgeSyncRequest`` workflow and its activity: asks a collection for a pass."""

    name: str


class SearchRequest(BaseModel):
    """Input of the ``KnowledgeSearch`` workflow and the ``chamvi.knowledge_search`` activity."""

    collections: list[str]
    query: str
    top_k: int = 5
    min_score: float | None = None
