"""A declared collection's document list: the ids it holds, so a pass finds deleted documents without a scan.

A pass keeps only 8-byte keys of the documents it read (``SeenIds``), so to learn which stored
documents no source yields any more it scanned every passage id of the generation. Qdrant's local
mode sorts and copies every id for that: about 0.2 s at 15 000 passages, most of what a small
re-sync on disk cost beyond its own writes. The list names the collection's documents in pages of at
most ``PAGE_SIZE`` ids (points of ``<prefix>__list__<name>``) behind a header that says which pages
are current, for which generation, how many ids they hold, and whether they can be trusted.

What keeps it right wherever a pass is killed:

* The list may name documents no longer stored (a pass killed while deleting them: the next pass
  finds no entry and deletes nothing), never miss one that is. Before a pass writes a document it
  found no entry for, it marks the header not ``clean``; a pass that finds the header not clean, of
  another generation, or missing deletes by the scan as before and lists every document it read.
* Pages are never rewritten: a changed page is a new point named after the pass, the header switches
  to the new pages in one write, and only then are the pages it no longer names deleted.

A pass that added no document and read as many as the list names writes nothing here: the list is
still exact. Memory stays bounded: the pass holds one page of ids at a time, and 8 bytes per
document it adds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from chamvi.knowledge._seen import SeenIds
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.models.knowledge import CollectionMeta, DocumentListHeader

PAGE_SIZE = 1024


@dataclass
class DocumentList:
    """One pass's side of the list: what it records, and how it deletes through the list at the end.

    Built by ``open``; the indexer calls ``record`` for every document the target holds after the
    pass, ``touch`` before writing one it found no entry for, and one of ``delete_unread`` (with
    ``relist`` when that answers False) or ``keep_unread`` once the read is over.
    """

    store: KnowledgeIndex
    name: str
    target: int
    pass_number: int
    header: DocumentListHeader | None
    exact: bool
    """The list names every document the collection stores (the header is clean and of the target,
    the generation searches read): a pass records only what it adds, and deletes through it."""
    added: SeenIds = field(default_factory=SeenIds)
    pending: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    """The pages this pass wrote, in order."""
    listed: int = 0
    """How many ids those pages hold."""

    @classmethod
    async def open(cls, store: KnowledgeIndex, meta: CollectionMeta, target: int) -> DocumentList:
        header = await store.list_header(meta.name)
        exact = (
            header is not None
            and header.clean
            and header.generation == target == meta.generation
            and meta.building is None
        )
        return cls(store, meta.name, target, meta.passes, header, exact)

    def record(self, document: str, *, new: bool) -> None:
        """Notes a document the target holds after this pass; ``new``: it had no entry before."""
        if not self.exact or (new and self.added.add(document)):
            self.pending.append(document)

    async def touch(self) -> None:
        """Marks the header not clean, before the pass writes a document the list may not name."""
        if self.header is not None and self.header.clean:
            self.header = self.header.model_copy(update={"clean": False})
            await self.store.put_list_header(self.name, self.header)

    async def spill(self, *, final: bool = False) -> None:
        """Writes the full pages of recorded ids (``final``: the rest too), so they are not held."""
        while len(self.pending) >= PAGE_SIZE or (final and self.pending):
            ids, self.pending = self.pending[:PAGE_SIZE], self.pending[PAGE_SIZE:]
            page = f"{self.pass_number}.{len(self.pages)}"
            await self.store.put_list_page(self.name, page, ids)
            self.pages.append(page)
            self.listed += len(ids)

    async def delete_unread(
        self, seen: SeenIds, documents: int, delete: Callable[[list[str]], Awaitable[None]]
    ) -> bool:
        """After a complete read: deletes the listed documents not read, then stores the new list.

        Args:
            seen: every document the pass read.
            documents: how many documents the target holds of those read.
            delete: deletes these documents' passages and entries (ids without either are passed over).

        Returns:
            False when the list cannot tell (it was not exact, or a page it names is missing): the
            caller scans instead, then calls ``relist``.
        """
        if not self.exact or self.header is None:
            return False
        if not self.added and documents == self.header.documents:
            return True  # nothing added and nothing missing: the list still names exactly what is held
        kept: list[str] = []
        listed = 0
        for page in self.header.pages:
            ids = await self.store.list_page(self.name, page)
            if ids is None:  # not written by a pass (pages are written before the header names them)
                await self.touch()  # and the next pass lists afresh
                return False
            await delete([d for d in ids if d not in seen])
            # a listed document found without an entry was recorded again as added: list it once
            still = [d for d in ids if d in seen and d not in self.added]
            if len(still) == len(ids):
                kept.append(page)
                listed += len(ids)
            else:
                self.pending.extend(still)
                await self.spill()
        await self._store(kept, listed)
        return True

    async def keep_unread(self) -> None:
        """After an incomplete read, which deletes nothing: the list names what the pass added too."""
        if self.exact and self.header is not None and self.added:
            await self._store(list(self.header.pages), self.header.documents)

    async def relist(self) -> None:
        """After a complete read that deleted by the scan: the list names every document read.

        Only when the pass recorded every document, that is when the list was not exact as it began.
        """
        if not self.exact:
            await self._store([], 0)

    async def _store(self, kept: list[str], listed: int) -> None:
        """Writes the rest of the recorded ids, then a clean header naming ``kept`` and this pass's pages.

        Pages named by no header (replaced ones, those of a pass that did not finish) go after it.
        """
        await self.spill(final=True)
        self.header = DocumentListHeader(
            generation=self.target, clean=True, pages=kept + self.pages, documents=listed + self.listed
        )
        await self.store.put_list_header(self.name, self.header)
        current = set(self.header.pages)
        stale = [p for p in await self.store.list_pages(self.name) if p not in current]
        await self.store.delete_list_pages(self.name, stale)
