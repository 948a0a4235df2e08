"""How a file store lays pages out on disk, and reads a folder (hand-written or not) back as pages."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import secrets
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from chamvi.errors import PageFormatError
from chamvi.knowledge_store import _frontmatter
from chamvi.knowledge_store._ids import (
    is_slug,
    make_id,
    map_links,
    parse_id,
    slugify,
    split_anchor,
    target_id,
)
from chamvi.knowledge_store._types import (
    RETIRED,
    SUPERSEDED,
    FieldValue,
    KnowledgePage,
    PageType,
    status_of,
)

INDEX_FILE = "index.md"
LOG_FILE = "log.md"
OVERVIEW_FILE = "overview.md"
ROOT_FILES = (INDEX_FILE, LOG_FILE, OVERVIEW_FILE)
RESERVED_ROOT_SLUGS = frozenset(name.removesuffix(".md") for name in ROOT_FILES)

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_NOTICE = re.compile(r"> \*\*(Superseded|Retired)\*\*")
_HEADING = re.compile(r"#[ \t]+(.+?)[ \t#]*$")

_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def lock_for(directory: Path) -> threading.RLock:
    """One lock per folder in this process, shared by every store object opened on it."""
    key = os.path.realpath(directory)
    with _locks_guard:
        return _locks.setdefault(key, threading.RLock())


def atomic_write(path: Path, text: str) -> None:
    """Writes a temporary file next to ``path`` and renames it over: a reader sees old or new, never half.

    A new file gets the umask's permissions (as ``open()`` would give it); a replaced one keeps its own.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def normal_content(content: str) -> str:
    """Content as a store keeps it: no blank lines before, no trailing whitespace, one final newline."""
    lines = content.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    text = "\n".join(lines).rstrip()
    return text + "\n" if text else ""


@dataclass
class Entry:
    """A page found on disk: its path relative to the store's folder, and the page read from it."""

    path: str
    page: KnowledgePage


@dataclass
class Snapshot:
    """Every page of the folder at one moment (retired ones too), and what could not be read."""

    pages: dict[str, Entry] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def exists(self, page_id: str) -> bool:
        return page_id in self.pages or page_id in self.unreadable


class Layout:
    """One folder per page type (``concept/refunds.md``), a root-folder type if one is declared.

    A file directly in the root folder is a page of the type declared with ``folder=""``; without
    one, it is no page (``check()`` says so), and neither are files in folders of no type.
    ``index.md``, ``log.md`` and ``overview.md`` in the root folder are the store's own.
    """

    def __init__(self, root: Path, types: tuple[PageType, ...]) -> None:
        self.root = root
        self.types = types
        self.by_name = {t.name: t for t in types}
        self.by_folder = {t.directory: t for t in types}
        self.root_type = self.by_folder.get("")
        self._cache: dict[str, tuple[tuple[int, int, int], KnowledgePage]] = {}

    # -- paths and links ---------------------------------------------------------------------------

    def default_path(self, page_id: str) -> str | None:
        page_type, slug = parse_id(page_id)
        known = self.by_name.get(page_type)
        if known is None:
            return None
        return f"{known.directory}/{slug}.md" if known.directory else f"{slug}.md"

    def id_for_path(self, rel: str) -> str | None:
        """The page id of a file path relative to the root, or None when no page lives there."""
        if not rel.endswith(".md"):
            return None
        folder, _, name = rel.rpartition("/")
        if "/" in folder or (not folder and name in ROOT_FILES):
            return None
        page_type = self.by_folder.get(folder)
        if page_type is None:
            return None
        stem = name[: -len(".md")]
        slug = stem if is_slug(stem) else slugify(stem)
        return make_id(page_type.name, slug) if slug else None

    def to_disk(self, content: str, from_dir: str, paths: dict[str, str]) -> str:
        """Links by id become relative ``.md`` paths from ``from_dir`` (``""`` is the root folder)."""

        def change(target: str) -> str | None:
            page_id = target_id(target)
            if page_id is None:
                return None
            path = paths.get(page_id) or self.default_path(page_id)
            if path is None:
                return None
            relative = posixpath.relpath(path, from_dir or ".")
            return quote(relative, safe="/-._~") + split_anchor(target)[1]

        return map_links(content, change)

    def target_from_disk(self, target: str, from_dir: str) -> str | None:
        """The page id (anchor kept) a relative ``.md`` link target names, or None for any other."""
        if not target or target[0] in "#/" or _SCHEME.match(target):
            return None
        base, anchor = split_anchor(target)
        path = posixpath.normpath(posixpath.join(from_dir, unquote(base)))
        if path.startswith("../") or path == "..":
            return None
        page_id = self.id_for_path(path)
        return page_id + anchor if page_id is not None else None

    def from_disk(self, content: str, from_dir: str) -> str:
        """Relative ``.md`` links to pages become ids; every other link stays as written."""
        return map_links(content, lambda target: self.target_from_disk(target, from_dir))

    # -- pages ------------------------------------------------------------------------------------

    def render(self, page: KnowledgePage, paths: dict[str, str]) -> str:
        """The file of a page: front matter, the notice of a superseded or retired page, a heading."""
        folder = posixpath.dirname(paths[page.id])
        fields: dict[str, FieldValue] = {"title": page.title, **page.fields}
        blocks = [f"# {page.title}"]
        notice = page.notice
        if notice is not None:
            blocks.insert(0, self.to_disk(notice, folder, paths))
        body = self.to_disk(page.content, folder, paths).rstrip("\n")
        if body:
            blocks.append(body)
        return _frontmatter.render(fields) + "\n" + "\n\n".join(blocks) + "\n"

    def parse(self, rel: str, page_id: str, text: str) -> KnowledgePage:
        try:
            front, body = _frontmatter.split(text)
        except _frontmatter.FrontMatterError as error:
            raise PageFormatError(
                f"{rel}: {error} (this store reads plain 'key: value' front matter)"
            ) from None
        fields: dict[str, FieldValue] = dict(front or {})
        title_field = fields.pop("title", None)
        lines = body.replace("\r\n", "\n").split("\n")
        _drop_blank(lines)
        if status_of(fields) in (SUPERSEDED, RETIRED) and lines and _NOTICE.match(lines[0]):
            while lines and lines[0].startswith(">"):
                lines.pop(0)
            _drop_blank(lines)
        heading = _HEADING.fullmatch(lines[0]) if lines else None
        if isinstance(title_field, str) and title_field.strip():
            title = title_field.strip()
            if heading is not None and heading.group(1) == title:
                lines.pop(0)
        elif heading is not None:
            title = heading.group(1)
            lines.pop(0)
        else:
            title = parse_id(page_id)[1].replace("-", " ").capitalize()
        content = self.from_disk(normal_content("\n".join(lines)), posixpath.dirname(rel))
        return KnowledgePage(
            id=page_id, type=parse_id(page_id)[0], title=title, content=content, fields=fields
        )

    def read_page(self, rel: str, page_id: str) -> KnowledgePage:
        path = self.root / rel
        try:
            info = path.stat()
            key = (info.st_mtime_ns, info.st_size, info.st_ino)
            cached = self._cache.get(rel)
            if cached is not None and cached[0] == key and cached[1].id == page_id:
                return cached[1]
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise PageFormatError(f"{rel}: not UTF-8 text") from None
        except OSError as error:
            raise PageFormatError(f"{rel}: cannot be read ({error.strerror or error})") from None
        page = self.parse(rel, page_id, text)
        self._cache[rel] = (key, page)
        return page

    def scan(self) -> Snapshot:
        """Reads the folder: every page file, and a problem for each file that is not one."""
        snapshot = Snapshot()
        if not self.root.is_dir():
            return snapshot
        for page_type in self.types:
            folder = self.root / page_type.directory if page_type.directory else self.root
            for name in _markdown_files(folder):
                if not page_type.directory and name in ROOT_FILES:
                    continue
                rel = f"{page_type.directory}/{name}" if page_type.directory else name
                page_id = self.id_for_path(rel)
                if page_id is None:
                    snapshot.problems.append(f"{rel}: its name makes no slug, so it is no page")
                    continue
                if not page_type.directory and parse_id(page_id)[1] in RESERVED_ROOT_SLUGS:
                    continue
                if snapshot.exists(page_id):
                    other = snapshot.pages[page_id].path if page_id in snapshot.pages else "another file"
                    snapshot.problems.append(f"{rel}: same page id {page_id!r} as {other}, so it is ignored")
                    continue
                try:
                    snapshot.pages[page_id] = Entry(rel, self.read_page(rel, page_id))
                except PageFormatError as error:
                    snapshot.unreadable[page_id] = error.message
                    snapshot.problems.append(error.message)
        self._stray(snapshot)
        return snapshot

    def _stray(self, snapshot: Snapshot) -> None:
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in self.by_folder:
                    snapshot.problems.append(
                        f"{entry.name}/: no page type keeps its pages in this folder, "
                        "so its files are no pages"
                    )
            elif self.root_type is None and entry.name.endswith(".md") and entry.name not in ROOT_FILES:
                snapshot.problems.append(
                    f"{entry.name}: a file directly in the root folder is no page unless a page type is "
                    "declared with folder=''"
                )


def _drop_blank(lines: list[str]) -> None:
    while lines and not lines[0].strip():
        lines.pop(0)


def _markdown_files(folder: Path) -> list[str]:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        e.name
        for e in entries
        if e.name.endswith(".md") and not e.name.startswith(".") and e.is_file(follow_symlinks=False)
    )
