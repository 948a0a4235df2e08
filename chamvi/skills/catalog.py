"""An agent's skill catalog: the skills it has at one version, the block that lists them, their text.

``build_catalog`` checks one agent's skills against each other and the limits, and writes the
manifest whose SHA-256 is the version a run pins. :class:`SkillCatalog` serves one version: the
system block listing name and description of each skill (``instructions``, a plain string for
composing instructions by hand too), and what ``skill_load`` and ``skill_read`` return.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from xml.sax.saxutils import escape

from pydantic_core import to_jsonable_python

from chamvi._constants import TOOL_SKILL_LOAD, TOOL_SKILL_READ
from chamvi.errors import InvalidInputError, InvalidSkillError, SkillNotFoundError
from chamvi.models import Message
from chamvi.models.skills import SkillCatalogManifest, SkillFileInfo, SkillInfo
from chamvi.skills._format import Skill
from chamvi.skills.limits import SkillLimits

CATALOG_PREAMBLE = (
    "You have skills: procedures written for tasks like yours. When a task matches a skill's "
    f"description, call {TOOL_SKILL_LOAD} with its name before you begin, and follow the "
    f"instructions it returns; {TOOL_SKILL_READ} reads one of the files the skill lists."
)


class BlobReader(Protocol):
    """Where a catalog's file contents come from, by SHA-256."""

    async def blob(self, sha256: str) -> bytes:
        """The bytes whose SHA-256 is ``sha256``."""
        ...


@dataclass(frozen=True)
class MemoryBlobs:
    """Contents held in this process: the catalog a worker loaded at its boot."""

    blobs: Mapping[str, bytes]

    async def blob(self, sha256: str) -> bytes:
        """The bytes of ``sha256``."""
        return self.blobs[sha256]


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def skill_info(skill: Skill) -> tuple[SkillInfo, dict[str, bytes]]:
    """The catalog entry of ``skill`` and its contents by SHA-256 (instructions included)."""
    instructions = skill.instructions.encode()
    files = [
        SkillFileInfo(path=f.path, size=len(f.data), sha256=f.sha256, text=f.is_text) for f in skill.files
    ]
    metadata = to_jsonable_python(dict(skill.metadata), fallback=str)
    content = {
        "name": skill.name,
        "description": skill.description,
        "trusted": skill.trusted,
        "instructions": _digest(instructions),
        "files": [f.model_dump() for f in files],
        "metadata": metadata,
    }
    info = SkillInfo(
        name=skill.name,
        description=skill.description,
        version=_digest(_canonical(content)),
        source=skill.source,
        trusted=skill.trusted,
        instructions_sha256=_digest(instructions),
        instructions_size=len(instructions),
        files=files,
        metadata=metadata,
        origin=skill.origin,
    )
    blobs = {info.instructions_sha256: instructions, **{f.sha256: f.data for f in skill.files}}
    return info, blobs


@dataclass(frozen=True)
class BuiltCatalog:
    """One agent's catalog as a boot built it: its manifest bytes, version and contents."""

    version: str
    manifest: bytes
    skills: tuple[SkillInfo, ...]
    blobs: Mapping[str, bytes]


def build_catalog(owner: str, skills: Iterable[Skill], limits: SkillLimits) -> BuiltCatalog:
    """Checks the skills of ``owner`` (``agent 'support'``: defaults, then its own) and builds their catalog.

    The same skill from the same place twice (one source given to the App and to the agent) counts
    once.

    Raises:
        InvalidSkillError: two skills share a name, a skill or the whole set is over its limit;
            one line naming the file.
    """
    infos: list[SkillInfo] = []
    origins: dict[str, tuple[str, str]] = {}
    blobs: dict[str, bytes] = {}
    total = 0
    for found in skills:
        info, contents = skill_info(found)
        seen = origins.get(info.name)
        if seen is not None:
            if seen == (found.origin, info.version):
                continue
            raise InvalidSkillError(
                f"skill {found.origin}: {owner} has another skill named {info.name!r} "
                f"({seen[0]}): rename one of them"
            )
        if found.size > limits.skill_bytes:
            raise InvalidSkillError(
                f"skill {found.origin}: is {found.size:,} bytes, over the limit of {limits.skill_bytes:,} "
                "bytes per skill (SkillLimits.skill_bytes)"
            )
        total += found.size
        if total > limits.agent_bytes:
            raise InvalidSkillError(
                f"skill {found.origin}: takes the skills of {owner} to {total:,} bytes, over the limit of "
                f"{limits.agent_bytes:,} bytes per agent (SkillLimits.agent_bytes)"
            )
        if len(infos) == limits.agent_skills:
            raise InvalidSkillError(
                f"skill {found.origin}: {owner} has more than {limits.agent_skills} skills "
                "(SkillLimits.agent_skills)"
            )
        origins[info.name] = (found.origin, info.version)
        infos.append(info)
        blobs.update(contents)
    # where this worker read them stays out: the version is the content's, wherever it is deployed
    manifest = SkillCatalogManifest(skills=infos)
    body = _canonical(manifest.model_dump(mode="json", exclude={"skills": {"__all__": {"origin"}}}))
    return BuiltCatalog(version=_digest(body), manifest=body, skills=tuple(infos), blobs=blobs)


def catalog_block(skills: Sequence[SkillInfo]) -> str:
    """The system block listing ``skills``: a preamble, then each skill's name and description."""
    entries = "\n".join(
        f"<skill>\n<name>{escape(s.name)}</name>\n<description>{escape(s.description)}</description>\n</skill>"
        for s in skills
    )
    return f"{CATALOG_PREAMBLE}\n\n<available_skills>\n{entries}\n</available_skills>"


def short_version(version: str) -> str:
    """The first 12 hex digits of a version, as steps and listings show it."""
    return version[:12]


class SkillCatalog:
    """The skills of one agent at one version, and their text.

    Args:
        version: the SHA-256 of the manifest.
        skills: the entries, in catalog order.
        blobs: where their contents are read from.
        read_bytes: the most text one :meth:`read` returns.
    """

    def __init__(
        self, version: str, skills: Sequence[SkillInfo], blobs: BlobReader, *, read_bytes: int
    ) -> None:
        self.version = version
        self.skills = tuple(skills)
        self._by_name = {s.name: s for s in self.skills}
        self._blobs = blobs
        self.read_bytes = read_bytes
        self.instructions = catalog_block(self.skills)
        """The catalog block as a plain string: what the model gets after the agent's instructions."""

    @classmethod
    def from_manifest(
        cls, version: str, manifest: SkillCatalogManifest, blobs: BlobReader, *, read_bytes: int
    ) -> SkillCatalog:
        """A pinned version read back from the store."""
        return cls(version, manifest.skills, blobs, read_bytes=read_bytes)

    def message(self) -> Message:
        """The catalog block as the system message that follows the configured instructions."""
        return Message(role="system", content=self.instructions)

    def get(self, name: str) -> SkillInfo:
        """The entry of ``name``.

        Raises:
            SkillNotFoundError: no skill of that name, naming the ones there are.
        """
        found = self._by_name.get(name)
        if found is None:
            known = ", ".join(repr(n) for n in self._by_name) or "none"
            raise SkillNotFoundError(f"unknown skill {name!r}: the skills are {known}")
        return found

    async def load(self, name: str) -> dict[str, Any]:
        """What ``skill_load`` returns: the skill's name and version first, its instructions, its files.

        Raises:
            SkillNotFoundError: no skill of that name.
        """
        info = self.get(name)
        text = (await self._blobs.blob(info.instructions_sha256)).decode()
        files = [{"path": f.path, "size": f.size, **({} if f.text else {"text": False})} for f in info.files]
        return {
            "skill": info.name,
            "version": short_version(info.version),
            "instructions": text,
            "files": files,
        }

    async def read(self, name: str, path: str) -> dict[str, Any]:
        """What ``skill_read`` returns: the skill's name and version, and one text file cut at ``read_bytes``.

        Raises:
            SkillNotFoundError: no such skill, or no such file in it.
            InvalidInputError: the file is not text.
        """
        info = self.get(name)
        wanted = path.removeprefix("./")
        found = next((f for f in info.files if f.path == wanted), None)
        if found is None:
            listed = ", ".join(repr(f.path) for f in info.files) or "none"
            raise SkillNotFoundError(f"skill {name!r} has no file {path!r}: its files are {listed}")
        if not found.text:
            raise InvalidInputError(f"file {path!r} of skill {name!r} is not text: it cannot be read to you")
        data = await self._blobs.blob(found.sha256)
        cut = len(data) > self.read_bytes
        text = data[: self.read_bytes].decode("utf-8", errors="ignore") if cut else data.decode()
        result: dict[str, Any] = {
            "skill": name,
            "version": short_version(info.version),
            "path": found.path,
            "size": found.size,
            "content": text,
        }
        if cut:
            result["truncated"] = f"the first {self.read_bytes:,} of {found.size:,} bytes"
        return result
