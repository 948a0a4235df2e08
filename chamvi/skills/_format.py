"""The Agent Skills format: a folder with a ``SKILL.md`` (YAML front matter, then Markdown).

The front matter needs ``name`` (the agent-name rule, the folder's own name) and ``description``
(at most 1 024 characters); ``license``, ``compatibility``, ``metadata``, ``allowed-tools`` and any
other key are kept as they are. What follows the front matter is the skill's instructions. Every
other file below the folder (``scripts/``, ``references/``, ``assets/``) belongs to the skill, as
bytes; the ones that are UTF-8 are text a model may read with ``skill_read``.

Every problem is an :class:`~chamvi.errors.InvalidSkillError` of one line that names the file.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from chamvi._constants import NAME_MAX_LENGTH, SKILL_DESCRIPTION_MAX_LENGTH, SKILL_FILE
from chamvi._names import is_valid_name
from chamvi.errors import InvalidSkillError

_FENCE = "---"


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill besides its ``SKILL.md``: its path inside the skill and its bytes."""

    path: str
    """Relative to the skill's folder, ``/``-separated (``references/policy.md``)."""
    data: bytes = field(repr=False)

    @property
    def sha256(self) -> str:
        """The hex SHA-256 of the bytes: the file's name in the artifact store."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def is_text(self) -> bool:
        """Whether the bytes are UTF-8 (``skill_read`` reads those only)."""
        try:
            self.data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True


@dataclass(frozen=True)
class Skill:
    """A skill as a source loaded it: checked, whole, in memory.

    Attributes:
        name: the skill's name (the agent-name rule).
        description: what it is for and when to use it, as the catalog shows it.
        instructions: the Markdown after the front matter, which ``skill_load`` returns.
        files: its other files, in path order.
        metadata: the front matter's other keys.
        origin: where it was read, for messages (a ``SKILL.md`` path, a git commit and path, code).
        source: the kind of source it came from (``folder``, ``git``, ``code``, a custom kind).
        trusted: False for a source declared untrusted: loading it taints the run.
    """

    name: str
    description: str
    instructions: str
    files: tuple[SkillFile, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "code"
    source: str = "code"
    trusted: bool = True

    @property
    def size(self) -> int:
        """Bytes of the instructions (UTF-8) and of every file: what the size limits count."""
        return len(self.instructions.encode()) + sum(len(f.data) for f in self.files)


def check_skill_name(name: Any, origin: str, folder: str | None = None) -> str:
    """``name`` once it keeps the agent-name rule and, for a folder's skill, matches the folder.

    Raises:
        InvalidSkillError: naming ``origin``.
    """
    if not is_valid_name(name):
        raise InvalidSkillError(
            f"skill {origin}: name {name!r} is invalid: use lowercase letters and digits in words "
            f"joined by single '-' (^[a-z0-9]+(-[a-z0-9]+)*$), at most {NAME_MAX_LENGTH} characters"
        )
    if folder is not None and name != folder:
        raise InvalidSkillError(
            f"skill {origin}: name {name!r} does not match its folder {folder!r}: rename one of them"
        )
    return str(name)


def check_description(description: Any, origin: str) -> str:
    """``description`` once it is non-empty text of at most 1 024 characters.

    Raises:
        InvalidSkillError: naming ``origin``.
    """
    if not isinstance(description, str) or not description.strip():
        raise InvalidSkillError(
            f"skill {origin}: description is missing: say in one or two sentences what the skill "
            "does and when to use it"
        )
    text = description.strip()
    if len(text) > SKILL_DESCRIPTION_MAX_LENGTH:
        raise InvalidSkillError(
            f"skill {origin}: description is {len(text):,} characters, over the limit of "
            f"{SKILL_DESCRIPTION_MAX_LENGTH:,}: keep the details in the instructions"
        )
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_skill_md(data: bytes, origin: str) -> tuple[dict[str, Any], str]:
    """The front matter and the instructions of a ``SKILL.md``.

    Raises:
        InvalidSkillError: not UTF-8, no front matter, front matter that is not a YAML mapping.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidSkillError(
            f"skill {origin}: is not UTF-8 (byte {error.start}): save it as UTF-8"
        ) from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != _FENCE:
        raise InvalidSkillError(
            f"skill {origin}: has no front matter: begin the file with a '---' line, then 'name:' and "
            "'description:', then another '---' line"
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == _FENCE), None)
    if end is None:
        raise InvalidSkillError(f"skill {origin}: its front matter has no closing '---' line")
    try:
        front = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as error:
        raise InvalidSkillError(
            f"skill {origin}: its front matter is not valid YAML: {_one_line(str(error))}"
        ) from None
    if not isinstance(front, dict):
        raise InvalidSkillError(
            f"skill {origin}: its front matter must be a mapping with 'name:' and 'description:'"
        )
    return {str(k): v for k, v in front.items()}, "\n".join(lines[end + 1 :]).strip("\n")


def skill_from_md(
    data: bytes,
    origin: str,
    *,
    folder: str | None,
    files: tuple[SkillFile, ...] = (),
    source: str,
    trusted: bool,
) -> Skill:
    """A skill from its ``SKILL.md`` bytes and its other files.

    Raises:
        InvalidSkillError: naming ``origin``.
    """
    front, instructions = parse_skill_md(data, origin)
    name = check_skill_name(front.pop("name", None), origin, folder)
    description = check_description(front.pop("description", None), origin)
    return Skill(
        name=name,
        description=description,
        instructions=instructions,
        files=files,
        metadata=front,
        origin=origin,
        source=source,
        trusted=trusted,
    )


def check_file_path(path: Any, where: str) -> str:
    """A file's path inside a skill, normalised (``./a//b`` is ``a/b``).

    Raises:
        InvalidSkillError: absolute, leaving the skill (``..``), empty, or the ``SKILL.md`` itself.
    """
    if not isinstance(path, str) or not path or "\0" in path or "\\" in path:
        raise InvalidSkillError(f"skill {where}: file path {path!r} is invalid: use 'folder/name.ext'")
    normal = posixpath.normpath(path)
    if path.startswith("/") or normal == ".." or normal.startswith("../") or normal == ".":
        raise InvalidSkillError(
            f"skill {where}: file path {path!r} leaves the skill: use a path inside it (references/a.md)"
        )
    if normal == SKILL_FILE:
        raise InvalidSkillError(
            f"skill {where}: {SKILL_FILE} is the skill's instructions, not one of its files"
        )
    return normal


def skills_from_tree(
    files: Mapping[str, bytes],
    origin: str,
    *,
    source: str,
    trusted: bool,
    root_name: str | None = None,
    where: Callable[[str], str] | None = None,
) -> list[Skill]:
    """The skills in a tree of files (relative ``/`` paths to bytes), in the order of their paths.

    A folder holding a ``SKILL.md`` is a skill and every file below it is one of its files; files
    outside any skill folder are not read. A ``SKILL.md`` at the top makes the tree one skill, whose
    name must be ``root_name``. ``where(path)`` names a path in messages (by default
    ``<origin>/<path>``).

    Raises:
        InvalidSkillError: a skill breaks the format, or a skill folder holds another one.
    """
    name_of = where or (lambda path: posixpath.join(origin, path))
    roots = sorted(posixpath.dirname(p) for p in files if posixpath.basename(p) == SKILL_FILE)
    found = set(roots)
    for root in roots:
        outer = next((a for a in _ancestors(root) if a in found), None)
        if outer is not None:
            raise InvalidSkillError(
                f"skill {name_of(posixpath.join(root, SKILL_FILE))}: is inside the skill folder "
                f"{name_of(outer) if outer else origin}: skill folders do not nest"
            )
    skills: list[Skill] = []
    for root in roots:
        prefix = f"{root}/" if root else ""
        own = tuple(
            SkillFile(path[len(prefix) :], files[path])
            for path in sorted(files)
            if path.startswith(prefix) and path != f"{prefix}{SKILL_FILE}"
        )
        md = f"{prefix}{SKILL_FILE}"
        skills.append(
            skill_from_md(
                files[md],
                name_of(md),
                folder=posixpath.basename(root) if root else root_name,
                files=own,
                source=source,
                trusted=trusted,
            )
        )
    return skills


def _ancestors(path: str) -> Iterator[str]:
    """The folders above ``path``, nearest first, ending with the tree's top (``""``)."""
    while path:
        path = posixpath.dirname(path)
        yield path
