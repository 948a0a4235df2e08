"""Skills as they are pinned, stored and listed: a catalog's manifest and the entries it holds.

A catalog's manifest is written to the artifact store as canonical JSON, and its SHA-256 is the
catalog's version, recorded by each run at its start (``AgentSpec.skills_version``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class SkillFileInfo(BaseModel):
    """One file of a skill besides its ``SKILL.md``: path, size, content hash, whether it is text."""

    path: str
    size: int
    sha256: str
    text: bool = True
    """UTF-8: ``skill_read`` reads it; other files are listed and never read to a model."""


class SkillInfo(BaseModel):
    """One skill of a catalog: what the catalog block lists and what ``skill_load`` returns."""

    name: str
    description: str
    version: str
    """The SHA-256 of the skill's content (name, description, instructions, files, trust)."""
    source: str
    """The kind of source it came from: ``folder``, ``git``, ``code`` or a custom kind."""
    trusted: bool = True
    instructions_sha256: str
    instructions_size: int
    files: list[SkillFileInfo] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    """The front matter's other keys (``license``, ``allowed-tools``, ...), as JSON."""
    origin: str | None = None
    """Where this worker read it (a ``SKILL.md`` path, a git commit): listings only, never stored."""


class SkillCatalogManifest(BaseModel):
    """An agent's skills at one version, in catalog order (the App's defaults, then its own)."""

    skills: list[SkillInfo] = Field(default_factory=list)


class AgentSkills(BaseModel):
    """``GET /agents/{agent}/skills`` and ``chamvi skills list --json``: an agent's current catalog."""

    agent: str
    version: str | None = None
    """The catalog version a run started now records; None for an agent without skills."""
    skills: list[SkillInfo] = Field(default_factory=list)
