"""Managed collections: created and filled one document at a time (over REST), no sources in code.

A document is stored in the collection's registry with its content before the caller hears
"accepted", and the collection's workflow is asked for a pass, so nothing accepted is lost when a
process dies right after. The pass (``Indexer.run_managed_pass``) embeds what is pending. A managed
collection is always untrusted: whoever may write it decides what it says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from chamvi.agents import validate_agent_name
from chamvi.errors import (
    ConflictError,
    InvalidAgentDefinitionError,
    InvalidDocumentError,
    InvalidInputError,
    NotFoundError,
)
from chamvi.knowledge.chunking import CHUNKER_VERSION
from chamvi.knowledge.documents import content_hash, validate_item
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.models.knowledge import CollectionMeta, CollectionStatus, DocumentEntry

MAX_CONTENT_CHARS = 1_048_576
DocumentStatus = Literal["pending", "ready", "failed"]


@dataclass(frozen=True)
class DocumentPage:
    data: list[DocumentEntry]
    total: int
    limit: int
    offset: int


class ManagedCollections:
    """The operations behind ``/knowledge``: read and write collections and their documents.

    Args:
        store: the Qdrant store the workers index into.
        embedders: to check the default model resolves.
        default_model: ``CHAMVI_KNOWLEDGE_MODEL``, else the app's ``embedding_model``.
        declared: the names the code declares (they cannot be created or deleted here).
        request_sync: asks a collection's workflow for a pass.
    """

    def __init__(
        self,
        store: KnowledgeIndex,
        embedders: EmbeddingRegistry,
        *,
        default_model: str | None,
        declared: Collection[str],
        request_sync: Callable[[str], Awaitable[object]],
    ) -> None:
        self.store = store
        self.embedders = embedders
        self.default_model = default_model
        self.declared = set(declared)
        self.request_sync = request_sync

    # ---- collections ----------------------------------------------------------------------

    def _shown(self, meta: CollectionMeta) -> CollectionMeta:
        """A managed collection serving another model than the default (or an older chunker) is stale."""
        if meta.kind != "managed" or meta.status != CollectionStatus.READY:
            return meta
        if (
            self.default_model and meta.managed_model != self.default_model
        ) or meta.chunker != CHUNKER_VERSION:
            return meta.model_copy(update={"status": CollectionStatus.STALE})
        return meta

    async def list(self) -> list[CollectionMeta]:
        return [self._shown(m) for m in sorted(await self.store.all_meta(), key=lambda m: m.name)]

    async def get(self, name: str) -> CollectionMeta:
        meta = await self.store.meta(name)
        if meta is None:
            raise NotFoundError(f"no knowledge collection {name!r}")
        return self._shown(meta)

    async def create(self, name: str) -> CollectionMeta:
        try:
            validate_agent_name(name)
        except InvalidAgentDefinitionError:
            raise InvalidInputError(
                f"collection name {name!r} is invalid: use lowercase letters and digits in words joined by "
                "single '-', at most 64 characters"
            ) from None
        if name in self.declared:
            raise ConflictError(f"collection {name!r} is declared in the code: it is fed by its sources")
        if await self.store.meta(name) is not None:
            raise ConflictError(f"collection {name!r} already exists")
        if not self.default_model:
            raise ConflictError(
                "no default embedding model for managed collections: set CHAMVI_KNOWLEDGE_MODEL "
                "or the app's embedding_model"
            )
        self.embedders.resolve(self.default_model)
        meta = CollectionMeta(name=name, kind="managed", trusted=False, managed_model=self.default_model)
        await self.store.save_meta(meta)
        return meta

    async def delete(self, name: str) -> None:
        meta = await self.get(name)
        if name in self.declared or (meta.kind == "declared" and meta.status != CollectionStatus.ORPHANED):
            raise ConflictError(f"collection {name!r} is declared in the code: remove it from the code first")
        await self.store.delete_collection(name)

    async def sync(self, name: str) -> None:
        """Runs a pass now (the seed's on-demand sync, for declared collections too): a managed one
        embeds its pending documents and, when stale, re-embeds into a new generation with the default.
        """
        meta = await self.get(name)
        if meta.kind == "managed" and meta.status == CollectionStatus.STALE and self.default_model:
            meta.managed_model = self.default_model
            await self.store.save_meta(meta)
        await self.request_sync(name)

    async def _managed(self, name: str) -> CollectionMeta:
        meta = await self.get(name)
        if meta.kind != "managed":
            raise ConflictError(
                f"collection {name!r} is declared in the code: its documents come from its sources"
            )
        return meta

    # ---- documents ------------------------------------------------------------------------

    async def put(
        self,
        name: str,
        document_id: str,
        *,
        content: str,
        title: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[DocumentEntry, bool]:
        """Stores a document; returns it and whether it was accepted for embedding (False: the same
        content is already embedded, nothing to do).
        """
        await self._managed(name)
        if isinstance(content, str) and len(content) > MAX_CONTENT_CHARS:
            raise InvalidInputError(f"content is {len(content)} characters: at most {MAX_CONTENT_CHARS}")
        try:
            document = validate_item(
                {
                    "id": document_id,
                    "content": content,
                    "title": title,
                    "source": source,
                    "metadata": metadata,
                }
            )
        except InvalidDocumentError as error:
            raise InvalidInputError(error.message) from None
        digest = content_hash(document)
        previous = await self.store.entry(name, document.id)
        if previous is not None and previous.hash == digest and previous.status != "failed":
            return previous, False
        entry = DocumentEntry(
            id=document.id,
            hash=digest,
            generation=previous.generation if previous else None,
            status="pending",
            passages=previous.passages if previous else 0,
            title=document.title,
            source=document.source,
            metadata=document.metadata,
            trusted=False,
            content=document.content,
            updated_at=datetime.now(UTC),
        )
        await self.store.put_entries(name, [entry])
        await self.request_sync(name)  # before answering: an accepted document is never forgotten
        return entry, True

    async def document(self, name: str, document_id: str) -> DocumentEntry:
        await self.get(name)
        entry = await self.store.entry(name, document_id)
        if entry is None:
            raise NotFoundError(f"collection {name!r} has no document {document_id!r}")
        return entry

    async def documents(
        self, name: str, *, status: DocumentStatus | None = None, limit: int = 50, offset: int = 0
    ) -> DocumentPage:
        await self.get(name)
        entries = [e async for e in self.store.entries(name) if status is None or e.status == status]
        entries.sort(key=lambda e: e.id)
        return DocumentPage(
            data=entries[offset : offset + limit], total=len(entries), limit=limit, offset=offset
        )

    async def delete_document(self, name: str, document_id: str) -> None:
        meta = await self._managed(name)
        if await self.store.entry(name, document_id) is None:
            raise NotFoundError(f"collection {name!r} has no document {document_id!r}")
        for generation in {meta.generation, meta.building} - {None}:
            await self.store.delete_passages(name, generation, [document_id])  # type: ignore[arg-type]
        await self.store.delete_entries(name, [document_id])
