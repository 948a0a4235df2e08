"""Skill copies in the stack's artifact store: content-addressed, shared by every worker, never moved.

A boot writes each agent's catalog there: the contents under ``skills/blobs/<sha256>``, then the
manifest under ``skills/catalogs/<version>.json`` (last, so a manifest found means its contents are
all there). A run that started on a version reads it back from here on any worker, after any deploy.
Git sources record their pins under ``skills/pins/<key>.json``.

Nothing is deleted: a version is small (an agent's skills are at most ~1 MiB) and a run may need it
as long as it waits (an approval waits up to 24 h by default, and runs may wait longer).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Mapping

import obstore

from chamvi._constants import SKILLS_STORE_PREFIX
from chamvi.artifacts import ArtifactStore
from chamvi.errors import ArtifactNotFoundError
from chamvi.models.skills import SkillCatalogManifest
from chamvi.skills.sources import PinRecord

BLOBS_KEPT_BYTES = 8 * 1024 * 1024
"""Contents of pinned (older) versions a worker keeps in memory, least recently read first out."""


class SkillStore:
    """The skill copies in ``artifacts`` (see the module)."""

    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts
        self._kept: OrderedDict[str, bytes] = OrderedDict()
        self._kept_bytes = 0

    def _catalog(self, version: str) -> str:
        return f"{SKILLS_STORE_PREFIX}/catalogs/{version}.json"

    def _blob(self, sha256: str) -> str:
        return f"{SKILLS_STORE_PREFIX}/blobs/{sha256}"

    async def save(self, version: str, manifest: bytes, blobs: Mapping[str, bytes]) -> None:
        """Writes a catalog's contents, then its manifest; a version written before is left as it is."""
        store = self.artifacts.store
        try:
            await obstore.head_async(store, self._catalog(version))
            return
        except FileNotFoundError:
            pass
        await asyncio.gather(
            *(obstore.put_async(store, self._blob(sha), data) for sha, data in blobs.items())
        )
        await obstore.put_async(store, self._catalog(version), manifest)

    async def _read(self, path: str, what: str) -> bytes:
        try:
            result = await obstore.get_async(self.artifacts.store, path)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            raise ArtifactNotFoundError(
                f"{what} is not in the artifact store at {self.artifacts.location}: a run started on it "
                "cannot read its skills (was the store emptied?)"
            ) from None

    async def manifest(self, version: str) -> SkillCatalogManifest:
        """The manifest of ``version``.

        Raises:
            ArtifactNotFoundError: the store does not hold it.
        """
        body = await self._read(self._catalog(version), f"skills catalog version {version[:12]!r}")
        return SkillCatalogManifest.model_validate_json(body)

    async def blob(self, sha256: str) -> bytes:
        """The contents whose SHA-256 is ``sha256``, kept in memory a while.

        Raises:
            ArtifactNotFoundError: the store does not hold them.
        """
        kept = self._kept.get(sha256)
        if kept is not None:
            self._kept.move_to_end(sha256)
            return kept
        data = await self._read(self._blob(sha256), f"skill content {sha256[:12]!r}")
        self._kept[sha256] = data
        self._kept_bytes += len(data)
        while self._kept_bytes > BLOBS_KEPT_BYTES and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._kept_bytes -= len(dropped)
        return data


class StorePins:
    """Git pins in the artifact store, so every worker of a stack loads the same commit.

    Synchronous: git sources load in a thread.
    """

    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts

    def _path(self, key: str) -> str:
        return f"{SKILLS_STORE_PREFIX}/pins/{key}.json"

    def get(self, key: str) -> PinRecord | None:
        """The recorded pin of ``key``, if any."""
        try:
            body = obstore.get(self.artifacts.store, self._path(key)).bytes()
        except FileNotFoundError:
            return None
        data = json.loads(bytes(body))
        return PinRecord(commit=str(data["commit"]), url=str(data["url"]), ref=str(data["ref"]))

    def set(self, key: str, record: PinRecord) -> None:
        """Records (or moves) the pin of ``key``."""
        body = {"commit": record.commit, "url": record.url, "ref": record.ref}
        obstore.put(self.artifacts.store, self._path(key), json.dumps(body).encode())
