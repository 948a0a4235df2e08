"""Where runtime agents' revisions live: a small protocol, and its object-store implementation.

A revision is an immutable JSON document. The default store is the artifact store's object store (a
folder under the data folder, S3 in production), which every worker, the HTTP API and ``chamvi dev``
share already, so a put in one process is seen by all. Layout::

    @agents/<name>/000001.json   the first revision
    @agents/<name>/000002.json   the next (a remove writes one too, without a definition)

Each revision is written with ``mode="create"`` (``O_EXCL`` in a folder, ``If-None-Match: *`` on S3):
two writers that race for number N cannot both win, so a number names one document forever, and the
loser takes N + 1. Nothing is ever overwritten or deleted, so a run pinned to a revision reads what
it started with for as long as it lives.

Another backend (a database table, the vector store) implements :class:`AgentRevisionStore`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Protocol

import obstore
from obstore.exceptions import AlreadyExistsError
from obstore.store import MemoryStore

from chamvi._constants import AGENT_REVISION_DIGITS, AGENT_REVISIONS_PREFIX
from chamvi.models.agents import AgentRevision

if TYPE_CHECKING:  # obstore's type stubs only
    from obstore.store import ObjectStore


class AgentRevisionStore(Protocol):
    """Immutable, numbered revisions per agent name, shared by every process of a deployment."""

    async def create(self, revision: AgentRevision) -> bool:
        """Writes ``revision`` unless its number is taken; False when another writer has it."""
        ...

    async def read(self, name: str, revision: int) -> AgentRevision | None:
        """Revision ``revision`` of ``name``, or None."""
        ...

    async def latest(self, name: str) -> AgentRevision | None:
        """The highest revision of ``name`` (a remove's included), or None when it has none."""
        ...

    async def latest_all(self) -> list[AgentRevision]:
        """The highest revision of every name (removes included), by name."""
        ...


def _path(name: str, revision: int) -> str:
    return f"{AGENT_REVISIONS_PREFIX}/{name}/{revision:0{AGENT_REVISION_DIGITS}d}.json"


def _parse(path: str) -> tuple[str, int] | None:
    """``(name, revision)`` of a revision's path; None for anything else (a partial write's file)."""
    head, _, file = path.rpartition("/")
    prefix, _, name = head.rpartition("/")
    number = file.removesuffix(".json")
    if prefix != AGENT_REVISIONS_PREFIX or not file.endswith(".json") or not number.isdigit():
        return None
    return name, int(number)


class ObjectRevisionStore:
    """:class:`AgentRevisionStore` over an obstore store (a folder, S3, memory).

    Args:
        store: the object store; ``ArtifactStore.store`` in a deployment.
        location: where it is, for messages.
    """

    def __init__(self, store: ObjectStore, location: str) -> None:
        self.store = store
        self.location = location

    @classmethod
    def memory(cls) -> ObjectRevisionStore:
        """A store in this process's memory (tests)."""
        return cls(MemoryStore(), "memory")

    async def create(self, revision: AgentRevision) -> bool:
        """Writes ``revision`` unless its number is taken (see the module); False when taken."""
        body = revision.model_dump_json(exclude_none=True).encode()
        try:
            await obstore.put_async(self.store, _path(revision.name, revision.revision), body, mode="create")
        except AlreadyExistsError:
            return False
        return True

    async def read(self, name: str, revision: int) -> AgentRevision | None:
        """Revision ``revision`` of ``name``, or None."""
        try:
            result = await obstore.get_async(self.store, _path(name, revision))
            body = bytes(await result.bytes_async())
        except FileNotFoundError:
            return None
        return AgentRevision.model_validate_json(body)

    async def _numbers(self, prefix: str) -> dict[str, list[int]]:
        entries = await obstore.list(self.store, prefix=prefix).collect_async()
        numbers: dict[str, list[int]] = defaultdict(list)
        for entry in entries:
            parsed = _parse(str(entry["path"]))
            if parsed is not None:
                numbers[parsed[0]].append(parsed[1])
        return numbers

    async def latest(self, name: str) -> AgentRevision | None:
        """The highest revision of ``name``, or None."""
        numbers = (await self._numbers(f"{AGENT_REVISIONS_PREFIX}/{name}/")).get(name)
        return await self.read(name, max(numbers)) if numbers else None

    async def latest_all(self) -> list[AgentRevision]:
        """The highest revision of every name, by name."""
        numbers = await self._numbers(f"{AGENT_REVISIONS_PREFIX}/")
        found = await asyncio.gather(*(self.read(name, max(numbers[name])) for name in sorted(numbers)))
        return [revision for revision in found if revision is not None]
