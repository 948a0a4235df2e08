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

from chamvi._names import validate_agent_name
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
    """One page of a collection's registry, by id, with the total the listing was cut from."""

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
        """Every collection, declared and managed, by name; managed ones behind the default show ``stale``."""
        return [self._shown(m) for m in sorted(await self.store.all_meta(), key=lambda m: m.name)]

    async def get(self, name: str) -> CollectionMeta:
        """One collection, shown ``stale`` when it is managed and behind the default model or chunker.

        Raises:
            NotFoundError: no collection has this name.
        """
        meta = await self.store.meta(name)
        if meta is None:
            raise NotFoundError(f"no knowledge collection {name!r}")
        return self._shown(meta)

    async def create(self, name: str) -> CollectionMeta:
        """Creates an empty, untrusted managed collection embedded with the default model.

        Raises:
            InvalidInputError: the name breaks the naming rule.
            ConflictError: the code declares the name, it exists already, or there is no default model.
        """
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
        """Removes a managed (or orphaned) collection with its generations, registry and meta.

        Raises:
            NotFoundError: no collection has this name.
            ConflictError: the code declares it; remove it from the code first.
        """
        meta = await self.get(name)
        if name in self.declared or (meta.kind == "declared" and meta.status != CollectionStatus.ORPHANED):
            raise ConflictError(f"collection {name!r} is declared in the code: remove it from the code first")
        await self.store.delete_collection(name)

    async def sync(self, name: str) -> None:
        """Asks for a pass now (the seed's on-demand sync, for declared collections too).

        A managed one embeds its pending documents and, when stale, re-embeds into a new generation
        with the default model.

        Raises:
            NotFoundError: no collection has this name.
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
        """Stores a document and asks for a pass before answering, so an accepted document is never lost.

        Returns:
            The registry entry, and whether it was accepted for embedding (False: the same content is
            already embedded or pending, nothing to do).

        Raises:
            NotFoundError: no collection has this name.
            ConflictError: the collection is declared in the code; its sources decide its documents.
            InvalidInputError: the content is too long, or the id or a field is invalid.
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
        """A document's registry entry: its status, fields and, when it failed, the provider's error.

        Raises:
            NotFoundError: no such collection, or no such document in it.
        """
        await self.get(name)
        entry = await self.store.entry(name, document_id)
        if entry is None:
            raise NotFoundError(f"collection {name!r} has no document {document_id!r}")
        return entry

    async def documents(
        self, name: str, *, status: DocumentStatus | None = None, limit: int = 50, offset: int = 0
    ) -> DocumentPage:
        """One page of a collection's documents, sorted by id, optionally only those of one ``status``.

        Raises:
            NotFoundError: no collection has this name.
        """
        await self.get(name)
        entries = [e async for e in self.store.entries(name) if status is None or e.status == status]
        entries.sort(key=lambda e: e.id)
        return DocumentPage(
            data=entries[offset : offset + limit], total=len(entries), limit=limit, offset=offset
        )

    async def delete_document(self, name: str, document_id: str) -> None:
        """Removes a document's passages from every generation searches read or a pass builds, then its entry.

        Raises:
            NotFoundError: no such collection, or no such document in it.
            ConflictError: the collection is declared in the code; its sources decide its documents.
        """
        meta = await self._managed(name)
        if await self.store.entry(name, document_id) is None:
            raise NotFoundError(f"collection {name!r} has no document {document_id!r}")
        for generation in {meta.generation, meta.building} - {None}:
            await self.store.delete_passages(name, generation, [document_id])  # type: ignore[arg-type]
        await self.store.delete_entries(name, [document_id])
