"""A process's skills: each agent's current catalog, loaded once, and the pinned versions runs ask for.

A worker loads it at its boot (``ChamviPlugin.prepare``: a bad skill fails the boot, in one line
naming the file) and saves each catalog to the artifact store. A run records its agent's version
when it starts (``AgentSpec.skills_version``); each of its model and tool calls asks :meth:`pinned`
for that version: the current catalog when it is the same, else the copy in the store, whichever
worker serves the call and whatever the folder holds now.
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from chamvi.artifacts import ArtifactStore
from chamvi.errors import ChamviError, InvalidSkillError
from chamvi.models.skills import AgentSkills
from chamvi.skills._format import Skill
from chamvi.skills.catalog import MemoryBlobs, SkillCatalog, build_catalog
from chamvi.skills.limits import SkillLimits
from chamvi.skills.sources import SkillLoadContext, SkillSource, check_source
from chamvi.skills.store import SkillStore, StorePins


class SkilledAgent(Protocol):
    """What the library reads of an agent (a ``chamvi.Agent``): the skills package stands below agents."""

    @property
    def name(self) -> str:
        """The agent's name, its catalog's key."""
        ...

    @property
    def revision(self) -> int | None:
        """None for an agent in code; an agent defined at runtime has the App's defaults."""
        ...

    @property
    def skills(self) -> tuple[SkillSource, ...]:
        """Its own skill sources, after the App's defaults."""
        ...


class SkillOwner(Protocol):
    """What the library reads of the definition it serves (a ``chamvi.App``), which stands above it."""

    @property
    def skills(self) -> tuple[SkillSource, ...]:
        """The skill sources every agent has."""
        ...

    @property
    def skill_limits(self) -> SkillLimits:
        """How large one skill and one agent's skills may be."""
        ...

    @property
    def agents(self) -> Mapping[str, SkilledAgent]:
        """The agents defined in code, by name."""
        ...


PINNED_KEPT = 64
"""Pinned (older) catalog versions a process keeps read, the least recently used first out."""


def default_cache() -> Path:
    """Where sources keep what they fetch when no data folder is given: the system's temp folder."""
    return Path(tempfile.gettempdir()) / "chamvi-skills"


async def load_source(source: SkillSource, ctx: SkillLoadContext) -> list[Skill]:
    """What ``source`` loads; a plain ``load`` runs in a thread.

    Raises:
        InvalidSkillError: the source's own, or its failure as one line naming the source.
    """
    try:
        produced: Any = await asyncio.to_thread(source.load, ctx)
        if inspect.isawaitable(produced):
            produced = await produced
        skills = list(produced)
    except ChamviError:
        raise
    except Exception as error:
        raise InvalidSkillError(
            f"skill source {source.kind!r} failed to load: {type(error).__name__}: {error}"
        ) from None
    for item in skills:
        if not isinstance(item, Skill):
            raise InvalidSkillError(f"skill source {source.kind!r}: loaded {item!r}, which is not a skill")
    return skills


def sources_of(app: SkillOwner) -> list[SkillSource]:
    """Every source the App and its agents declare, once each, in declaration order."""
    found: dict[int, SkillSource] = {}
    for source in (*app.skills, *(s for a in app.agents.values() for s in a.skills)):
        found.setdefault(id(source), source)
    return list(found.values())


class SkillLibrary:
    """The skills of one process serving ``app`` (see the module).

    Args:
        app: the definition whose skills it loads.
        artifacts: the artifact store it saves to and reads pinned versions from, when it loads
            without being given one (a runtime outside a worker).
        cache: where sources keep what they fetch (git clones); by default the temp folder.
    """

    def __init__(
        self, app: SkillOwner, artifacts: Callable[[], ArtifactStore], cache: Path | None = None
    ) -> None:
        self.app = app
        self._artifacts = artifacts
        self.cache = cache or default_cache()
        self._lock = asyncio.Lock()
        self._current: dict[str | None, SkillCatalog] | None = None
        self._versions: dict[str, SkillCatalog] = {}
        self._store: SkillStore | None = None
        self._pinned: OrderedDict[str, SkillCatalog] = OrderedDict()

    @property
    def limits(self) -> SkillLimits:
        """The App's limits."""
        return self.app.skill_limits

    async def load(
        self,
        *,
        artifacts: ArtifactStore | None = None,
        update: bool = False,
        record: bool = True,
        save: bool = True,
    ) -> None:
        """Loads every agent's skills, checks them, and saves each catalog (once per process).

        Args:
            artifacts: the store to save to and read pins from (the runtime's by default).
            update: move git pins to what their refs name now, and load again.
            record: record a git source's first resolution (off for a read-only look).
            save: write the catalogs to the store (off for ``chamvi check``).

        Raises:
            InvalidSkillError: a bad skill, as one line naming the file.
        """
        async with self._lock:
            if self._current is not None and not update:
                return
            store = SkillStore(artifacts or self._artifacts())
            ctx = SkillLoadContext(
                limits=self.limits,
                cache=self.cache,
                pins=StorePins(store.artifacts),
                update=update,
                record=record,
            )
            loaded: dict[int, list[Skill]] = {}
            for source in sources_of(self.app):
                loaded[id(source)] = await load_source(source, ctx)
            current: dict[str | None, SkillCatalog] = {}
            # None: the App's defaults alone, the catalog of every agent defined at runtime
            agents = self.app.agents.values()
            owners: list[tuple[str | None, str, tuple[SkillSource, ...]]] = [
                (None, "App(skills=...)", self.app.skills),
                *((a.name, f"agent {a.name!r}", (*self.app.skills, *a.skills)) for a in agents),
            ]
            for owner, label, sources in owners:
                if not sources:
                    continue
                built = build_catalog(
                    label, (s for source in sources for s in loaded[id(source)]), self.limits
                )
                if save:
                    await store.save(built.version, built.manifest, built.blobs)
                current[owner] = SkillCatalog(
                    built.version, built.skills, MemoryBlobs(built.blobs), read_bytes=self.limits.read_bytes
                )
            self._store, self._current = store, current
            self._versions = {c.version: c for c in current.values()}

    async def _loaded(self) -> dict[str | None, SkillCatalog]:
        if self._current is None:
            await self.load()
        assert self._current is not None
        return self._current

    async def current(self, agent: SkilledAgent) -> SkillCatalog | None:
        """The catalog a run of ``agent`` starting now records; None for an agent without skills.

        An agent in code has its own (the App's defaults, then its ``skills=``); an agent defined at
        runtime (``chamvi.dynamic_agents``) has the App's defaults.
        """
        return (await self._loaded()).get(agent.name if agent.revision is None else None)

    async def pinned(self, version: str | None) -> SkillCatalog | None:
        """The catalog a run recorded at its start; None for a run that recorded none.

        Raises:
            ArtifactNotFoundError: the store does not hold that version.
        """
        if version is None:
            return None
        await self._loaded()
        current = self._versions.get(version)
        if current is not None:
            return current
        kept = self._pinned.get(version)
        if kept is None:
            assert self._store is not None
            manifest = await self._store.manifest(version)
            kept = SkillCatalog.from_manifest(
                version, manifest, self._store, read_bytes=self.limits.read_bytes
            )
            self._pinned[version] = kept
            while len(self._pinned) > PINNED_KEPT:
                self._pinned.popitem(last=False)
        self._pinned.move_to_end(version)
        return kept

    async def listing(self, agent: SkilledAgent) -> AgentSkills:
        """``agent``'s current skills, as ``chamvi skills list`` and the HTTP API show them."""
        catalog = await self.current(agent)
        if catalog is None:
            return AgentSkills(agent=agent.name)
        return AgentSkills(agent=agent.name, version=catalog.version, skills=list(catalog.skills))

    async def runtime_listing(self, name: str) -> AgentSkills:
        """The skills of ``name``, an agent defined at runtime: the App's defaults."""
        catalog = (await self._loaded()).get(None)
        if catalog is None:
            return AgentSkills(agent=name)
        return AgentSkills(agent=name, version=catalog.version, skills=list(catalog.skills))


def skill_catalog(
    *sources: SkillSource, limits: SkillLimits | None = None, cache: Path | None = None
) -> SkillCatalog:
    """The catalog of ``sources``, loaded now: for composing instructions by hand (``.instructions``).

    Sources load as at a boot (a plain ``load`` only: an ``async`` custom source needs
    :func:`load_skill_catalog`); git pins are kept in this process.

    Raises:
        InvalidSkillError: a bad skill, as one line naming the file.
        InvalidAgentDefinitionError: something that is not a source.
    """
    checked, ctx = _manual(sources, "skill_catalog()", limits, cache)
    skills: list[Skill] = []
    for source in checked:
        produced: Any = None
        if not getattr(source, "is_async", False) and not inspect.iscoroutinefunction(source.load):
            produced = source.load(ctx)
        if produced is None or inspect.isawaitable(produced):
            if inspect.iscoroutine(produced):
                produced.close()
            raise InvalidSkillError(
                f"skill source {source.kind!r} loads asynchronously: use `await load_skill_catalog(...)`"
            )
        skills.extend(produced)
    return _catalog(skills, ctx.limits)


async def load_skill_catalog(
    *sources: SkillSource, limits: SkillLimits | None = None, cache: Path | None = None
) -> SkillCatalog:
    """:func:`skill_catalog` from async code, and for sources whose ``load`` is ``async``.

    Raises:
        InvalidSkillError: a bad skill, as one line naming the file.
        InvalidAgentDefinitionError: something that is not a source.
    """
    checked, ctx = _manual(sources, "load_skill_catalog()", limits, cache)
    skills = [s for source in checked for s in await load_source(source, ctx)]
    return _catalog(skills, ctx.limits)


def _manual(
    sources: Sequence[SkillSource], where: str, limits: SkillLimits | None, cache: Path | None
) -> tuple[list[SkillSource], SkillLoadContext]:
    """The sources checked, and a context whose git pins stay in this process."""
    checked = [check_source(s, where) for s in sources]
    return checked, SkillLoadContext(limits=limits or SkillLimits(), cache=cache or default_cache())


def _catalog(skills: Iterable[Skill], limits: SkillLimits) -> SkillCatalog:
    built = build_catalog("the catalog", skills, limits)
    return SkillCatalog(built.version, built.skills, MemoryBlobs(built.blobs), read_bytes=limits.read_bytes)
