"""Where skills come from: a folder, code, a custom source (and git, in ``chamvi.skills.git``).

A source is declared with the App (``App(skills=[...])``, every agent's defaults) or an agent
(``define_agent(skills=[...])``, its own extras) and loaded when a worker boots, ``chamvi check``
runs, or ``chamvi skills list`` shows them. A source's ``load(ctx)`` returns :class:`Skill` objects,
checked already; the catalog then checks names against each other and the sizes against the App's
:class:`SkillLimits`.
"""

from __future__ import annotations

import dataclasses
import errno
import inspect
import os
import posixpath
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chamvi._constants import SKILL_FILE
from chamvi.errors import InvalidAgentDefinitionError, InvalidSkillError
from chamvi.skills._format import (
    Skill,
    SkillFile,
    check_description,
    check_file_path,
    check_skill_name,
    skills_from_tree,
)
from chamvi.skills.limits import SkillLimits


@dataclass(frozen=True)
class PinRecord:
    """The commit a git source's branch or tag resolved to, when it was recorded."""

    commit: str
    url: str
    ref: str


class PinStore(Protocol):
    """Where git sources record what their branch or tag resolved to, shared by a stack's processes."""

    def get(self, key: str) -> PinRecord | None:
        """The recorded pin of ``key``, if any."""
        ...

    def set(self, key: str, record: PinRecord) -> None:
        """Records (or moves) the pin of ``key``."""
        ...


class MemoryPins:
    """Pins kept in this process only (a runtime without an artifact store, and tests)."""

    def __init__(self) -> None:
        self._pins: dict[str, PinRecord] = {}

    def get(self, key: str) -> PinRecord | None:
        """The recorded pin of ``key``, if any."""
        return self._pins.get(key)

    def set(self, key: str, record: PinRecord) -> None:
        """Records (or moves) the pin of ``key``."""
        self._pins[key] = record


@dataclass(frozen=True)
class SkillLoadContext:
    """What a source gets when it loads.

    Attributes:
        limits: the App's size limits; a source that reads files checks them before reading.
        cache: a folder a source may keep what it fetched in (git clones), kept between boots.
        pins: where git sources find and record the commit their branch or tag resolved to.
        update: move git pins to what their branch or tag names now (``chamvi skills update``).
        record: record a first resolution; off for a read-only look (``chamvi check``).
    """

    limits: SkillLimits = field(default_factory=SkillLimits)
    cache: Path = field(default_factory=lambda: Path(".chamvi") / "skills")
    pins: PinStore = field(default_factory=MemoryPins)
    update: bool = False
    record: bool = True


@runtime_checkable
class SkillSource(Protocol):
    """A source of skills: ``kind`` and ``trusted`` say what it is, ``load(ctx)`` returns its skills.

    ``load`` may be a plain function (it runs in a thread) or a coroutine function. ``check()``, when
    the source has one, runs at definition.
    """

    @property
    def kind(self) -> str:
        """What kind of source it is, for listings and messages (``folder``, ``git``, ...)."""
        ...

    @property
    def trusted(self) -> bool:
        """False: loading one of its skills taints the run."""
        ...

    def load(self, ctx: SkillLoadContext) -> Iterable[Skill] | Awaitable[Iterable[Skill]]:
        """Its skills, checked (see :mod:`chamvi.skills.sources`)."""
        ...


def check_source(source: Any, where: str) -> SkillSource:
    """``source`` once it is a skill source, with its own ``check()`` run.

    Raises:
        InvalidAgentDefinitionError: it is none, or its check failed.
    """
    if not isinstance(source, SkillSource):
        raise InvalidAgentDefinitionError(
            f"{where}: {source!r} is not a skill source: use skills_folder(...), git_skills(...), "
            "skill(...) or define_skill_source(...)"
        )
    check = getattr(source, "check", None)
    if callable(check):
        check()
    return source


# --- skills_folder() ------------------------------------------------------------------------------


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """Every regular file and every symbolic link below ``root``, as relative ``/`` paths.

    Dot entries are skipped; a link is listed, never followed (a link to a folder is listed with a
    trailing ``/``).
    """
    found: list[str] = []
    links: list[str] = []
    for folder, dirs, names in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else f"{base}/"
        kept = []
        for name in sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"):
            if os.path.islink(Path(folder) / name):
                links.append(f"{prefix}{name}/")
            else:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(names):
            if name.startswith("."):
                continue
            if os.path.islink(Path(folder) / name):
                links.append(prefix + name)
            elif (Path(folder) / name).is_file():
                found.append(prefix + name)
    return found, links


def _refuse_links(root: Path, found: list[str], links: list[str]) -> None:
    """Refuses the links a skill would be read through: inside a skill folder, or to a folder.

    A link is never followed (as ``git_skills`` and the knowledge ``folder()`` source do not): one
    to ``/proc/self/environ`` or to a secret would hand the file to the model. A link to a folder
    may hide a skill the walk would not find; a file link outside every skill folder is not read,
    so it is let be.

    Raises:
        InvalidSkillError: naming every such link.
    """
    roots = {posixpath.dirname(p) for p in (*found, *links) if posixpath.basename(p) == SKILL_FILE}
    refused = [link for link in links if link.endswith("/") or _skill_of(link, roots) is not None]
    if refused:
        raise _links_refused(root, sorted(refused))


def _links_refused(root: Path, links: list[str]) -> InvalidSkillError:
    return InvalidSkillError(
        f"skill folder {root}: {', '.join(repr(link) for link in links)} "
        f"{'is a symbolic link' if len(links) == 1 else 'are symbolic links'}, and skills_folder() "
        "never follows links (they may lead out of the folder): put the file or folder itself there"
    )


def _skill_of(path: str, roots: set[str]) -> str | None:
    """The skill folder (one of ``roots``) that ``path`` lies in, if any."""
    folder = posixpath.dirname(path.rstrip("/"))
    while folder not in roots and folder:
        folder = posixpath.dirname(folder)
    return folder if folder in roots else None


def skill_paths(sizes: Mapping[str, int], limits: SkillLimits, where: Callable[[str], str]) -> list[str]:
    """The paths of ``sizes`` (relative path to size) inside a skill folder, before any is read.

    Raises:
        InvalidSkillError: a skill's files are over ``limits.skill_bytes``, naming the file.
    """
    roots = {posixpath.dirname(p) for p in sizes if posixpath.basename(p) == SKILL_FILE}
    totals: dict[str, int] = {}
    inside: list[str] = []
    for path in sorted(sizes):
        folder = _skill_of(path, roots)
        if folder is None:
            continue
        totals[folder] = totals.get(folder, 0) + sizes[path]
        if totals[folder] > limits.skill_bytes:
            raise InvalidSkillError(
                f"skill {where(path)}: takes the skill in {where(folder)} over the "
                f"limit of {limits.skill_bytes:,} bytes per skill (SkillLimits.skill_bytes)"
            )
        inside.append(path)
    return inside


def read_skill_tree(root: Path, limits: SkillLimits) -> dict[str, bytes]:
    """The files of every skill folder below ``root``, by relative path; sizes checked before reading.

    Raises:
        InvalidSkillError: a skill's files are over ``limits.skill_bytes``, or a file cannot be read.
    """
    found, links = _walk(root)
    _refuse_links(root, found, links)
    sizes: dict[str, int] = {}
    for path in found:
        try:
            sizes[path] = (root / path).stat().st_size
        except OSError as error:
            raise InvalidSkillError(
                f"skill {root / path}: cannot be read: {error.strerror or error}"
            ) from None
    files: dict[str, bytes] = {}
    for path in skill_paths(sizes, limits, lambda rel: str(root / rel)):
        try:
            files[path] = _read_no_link(root / path)
        except OSError as error:
            if error.errno == errno.ELOOP:  # swapped for a link since the walk
                raise _links_refused(root, [path]) from None
            raise InvalidSkillError(
                f"skill {root / path}: cannot be read: {error.strerror or error}"
            ) from None
    return files


def _read_no_link(path: Path) -> bytes:
    """The bytes of the regular file ``path``; ``ELOOP`` if it is a link now."""
    # O_NONBLOCK: a FIFO put in the file's place must not wait for a writer
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return file.read()


@dataclass(frozen=True)
class SkillsFolder:
    """Every skill folder below ``path`` (an absolute path), in path order."""

    path: Path
    trusted: bool = True
    kind: str = "folder"

    def check(self) -> None:
        """Refuses a path that is not a directory, at definition.

        Raises:
            InvalidAgentDefinitionError: it is not.
        """
        if not self.path.is_dir():
            raise InvalidAgentDefinitionError(f"skills_folder() path {str(self.path)!r} is not a directory")

    def load(self, ctx: SkillLoadContext) -> list[Skill]:
        """Reads every skill folder below the path.

        Raises:
            InvalidSkillError: a skill breaks the format, or the folder holds none.
        """
        self.check()
        files = read_skill_tree(self.path, ctx.limits)
        skills = skills_from_tree(
            files,
            str(self.path),
            source=self.kind,
            trusted=self.trusted,
            root_name=self.path.name,
            where=lambda path: str(self.path / path),
        )
        if not skills:
            raise InvalidSkillError(
                f"skill folder {self.path}: holds no skill: a skill is a folder with a {SKILL_FILE} "
                "(skills/<name>/SKILL.md)"
            )
        return skills


def skills_folder(path: str | os.PathLike[str], *, trusted: bool = True) -> SkillsFolder:
    """Every skill below ``path``: each folder holding a ``SKILL.md`` (``path`` itself may be one).

    ``path`` is resolved against the working directory now and checked by the App (a directory).
    Dot files and dot folders are skipped; files outside any skill folder are not read. Links are
    never followed: one inside a skill folder, or one to a folder, fails the load naming it.
    """
    if not isinstance(trusted, bool):
        raise InvalidAgentDefinitionError("skills_folder() trusted must be True or False")
    return SkillsFolder(Path(os.path.abspath(os.fspath(path))), trusted=trusted)


# --- skill() --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InlineSkill:
    """One skill written in code (:func:`skill`): a source of that skill alone."""

    skill: Skill
    kind: str = "code"

    @property
    def trusted(self) -> bool:
        """Whether loading it leaves the run trusted."""
        return self.skill.trusted

    def load(self, ctx: SkillLoadContext) -> list[Skill]:
        """The skill (checked when it was defined)."""
        return [self.skill]


def _caller() -> str:
    frame = inspect.currentframe()
    outer = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    return f"{outer.f_code.co_filename}:{outer.f_lineno}" if outer is not None else "code"


def skill(
    *,
    name: str,
    description: str,
    instructions: str,
    files: Mapping[str, str | bytes] | None = None,
    trusted: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> InlineSkill:
    """A skill written in code, as a source: ``App(skills=[skill(name=..., ...)])``.

    Args:
        name: the agent-name rule (``refund-procedure``).
        description: what it does and when to use it (at most 1 024 characters).
        instructions: the Markdown the model follows once it loads the skill.
        files: its other files by path (``{"references/policy.md": "..."}``); text is stored as UTF-8.
        trusted: False: loading it taints the run.
        metadata: what a ``SKILL.md``'s front matter would hold besides name and description.

    Raises:
        InvalidSkillError: naming the file and line that defined it.
    """
    origin = f"{name!r} defined at {_caller()}"
    checked_name = check_skill_name(name, origin)
    checked_description = check_description(description, origin)
    if not isinstance(instructions, str):
        raise InvalidSkillError(f"skill {origin}: instructions must be a string of Markdown")
    checked: dict[str, SkillFile] = {}
    for path, data in (files or {}).items():
        normal = check_file_path(path, origin)
        if not isinstance(data, str | bytes):
            raise InvalidSkillError(f"skill {origin}: file {path!r} must be text or bytes")
        if normal in checked:
            raise InvalidSkillError(f"skill {origin}: file {normal!r} is given twice")
        checked[normal] = SkillFile(normal, data.encode() if isinstance(data, str) else bytes(data))
    return InlineSkill(
        Skill(
            name=checked_name,
            description=checked_description,
            instructions=instructions.strip("\n"),
            files=tuple(checked[p] for p in sorted(checked)),
            metadata=dict(metadata or {}),
            origin=origin,
            source="code",
            trusted=trusted,
        )
    )


# --- define_skill_source() ------------------------------------------------------------------------


LoadFn = Callable[
    [SkillLoadContext], Iterable[Skill | InlineSkill] | Awaitable[Iterable[Skill | InlineSkill]]
]


@dataclass(frozen=True)
class CustomSkillSource:
    """A source defined by a function (:func:`define_skill_source`)."""

    kind: str
    load_fn: LoadFn
    trusted: bool = True

    @property
    def is_async(self) -> bool:
        """Whether its function is a coroutine function (it loads only where a loop runs)."""
        return inspect.iscoroutinefunction(self.load_fn)

    def load(self, ctx: SkillLoadContext) -> list[Skill] | Awaitable[list[Skill]]:
        """What the function returns, each item as a skill of this source.

        Raises:
            InvalidSkillError: the function returned something that is not skills.
        """
        produced = self.load_fn(ctx)
        if inspect.isawaitable(produced):

            async def later() -> list[Skill]:
                return self._skills(await produced)

            return later()
        return self._skills(produced)

    def _skills(self, produced: Any) -> list[Skill]:
        if isinstance(produced, str | bytes) or not isinstance(produced, Iterable):
            raise InvalidSkillError(
                f"skill source {self.kind!r}: load() must return a list of skills, not {produced!r}"
            )
        skills: list[Skill] = []
        for item in produced:
            found = item.skill if isinstance(item, InlineSkill) else item
            if not isinstance(found, Skill):
                raise InvalidSkillError(
                    f"skill source {self.kind!r}: load() returned {item!r}: build each with skill(...)"
                )
            origin = f"{found.origin} (source {self.kind!r})" if found.source == "code" else found.origin
            skills.append(
                dataclasses.replace(
                    found, origin=origin, source=self.kind, trusted=found.trusted and self.trusted
                )
            )
        return skills


def define_skill_source(*, kind: str, load: LoadFn, trusted: bool = True) -> CustomSkillSource:
    """A source of your own: ``load(ctx)`` (plain or ``async``) returns skills built with :func:`skill`.

    Args:
        kind: what it is, for listings and messages (``"wiki"``, ``"cms"``).
        load: called at each boot; a plain function runs in a thread.
        trusted: False: loading any of its skills taints the run.

    Raises:
        InvalidAgentDefinitionError: ``kind`` is empty or ``load`` is not callable.
    """
    if not isinstance(kind, str) or not kind.strip():
        raise InvalidAgentDefinitionError("define_skill_source() kind must be a non-empty string")
    if not callable(load):
        raise InvalidAgentDefinitionError(f"define_skill_source({kind!r}): load must be a function of ctx")
    return CustomSkillSource(kind=kind, load_fn=load, trusted=trusted)
