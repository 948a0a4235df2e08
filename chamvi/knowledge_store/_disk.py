"""How a file store lays pages out on disk, and reads a folder (hand-written or not) back as pages."""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import secrets
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO
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
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def lock_for(directory: Path) -> threading.RLock:
    """One lock per folder in this process, shared by every store object opened on it."""
    key = os.path.realpath(directory)
    with _locks_guard:
        return _locks.setdefault(key, threading.RLock())


def link_refused(rel: str, *, folder: bool) -> PageFormatError:
    """The error for a link inside the store's folder: following it would read or write elsewhere."""
    what = "folder" if folder else "file"
    return PageFormatError(
        f"{rel}{'/' if folder else ''}: a symbolic link, and the store does not follow links out of its "
        f"folder: put the {what} itself here"
    )


def open_folder(root: Path, folder: str, *, create: bool = False) -> int:
    """A descriptor of ``folder`` (``""`` is the root) that no link inside the root can redirect.

    The root itself may be a link: a person chose it. A link below it would take the store out of
    its folder, so the folder is opened relative to the root's descriptor without following one,
    and every file is then opened relative to the folder's descriptor: swapping either for a link
    between a check and an open cannot lead outside.

    Raises:
        FileNotFoundError: the folder does not exist (and ``create`` is False).
        PageFormatError: the folder is a link.
    """
    if create:
        root.mkdir(parents=True, exist_ok=True)
    root_fd = os.open(root, _DIRECTORY)
    if not folder:
        return root_fd
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, dir_fd=root_fd)
        try:
            return os.open(folder, _DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
        except NotADirectoryError:
            if _is_link(folder, root_fd):
                raise link_refused(folder, folder=True) from None
            raise
    finally:
        os.close(root_fd)


def open_file(root: Path, rel: str) -> BinaryIO:
    """A regular file below ``root`` opened for reading, through no link (see :func:`open_folder`).

    Raises:
        FileNotFoundError: there is no such file.
        PageFormatError: the file or its folder is a link, or the file is no regular file.
    """
    folder, _, name = rel.rpartition("/")
    folder_fd = open_folder(root, folder)
    try:
        # O_NONBLOCK: opening a FIFO put in the file's place must not wait for a writer
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise link_refused(rel, folder=False) from None
        raise
    finally:
        os.close(folder_fd)
    file = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        file.close()
        raise PageFormatError(f"{rel}: not a regular file: put a markdown file here, or remove it")
    return file


def read_text(root: Path, rel: str) -> str | None:
    """The text of a file below ``root``, None when there is none; never read through a link."""
    try:
        with open_file(root, rel) as file:
            return file.read().decode("utf-8")
    except FileNotFoundError:
        return None


def atomic_write(root: Path, rel: str, text: str) -> None:
    """Writes a temporary file next to ``rel`` and renames it over: a reader sees old or new, never half.

    A new file gets the umask's permissions (as ``open()`` would give it); a replaced one keeps its own.
    Both files are named relative to their folder's descriptor, so the write stays inside ``root``.

    Raises:
        PageFormatError: the file or its folder is a link.
    """
    folder, _, name = rel.rpartition("/")
    folder_fd = open_folder(root, folder, create=True)
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        try:
            mode: int | None = os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode):
            raise link_refused(rel, folder=False)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o666, dir_fd=folder_fd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
                if mode is not None:
                    os.fchmod(file.fileno(), stat.S_IMODE(mode))
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder_fd)
            raise
    finally:
        os.close(folder_fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


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
    links: dict[str, str] = field(default_factory=dict)
    """Links the store refused (``concept`` for a folder, ``overview.md``), each with its problem."""

    def exists(self, page_id: str) -> bool:
        return page_id in self.pages or page_id in self.unreadable

    def refuse_links(self, *rels: str) -> None:
        """Raises before a write when a file it would replace, or that file's folder, is a link.

        Raises:
            PageFormatError: the first such link, with the problem ``check()`` reports for it.
        """
        for rel in rels:
            for place in (rel.rpartition("/")[0], rel):
                if place in self.links:
                    raise PageFormatError(self.links[place])

    def refuse(self, rel: str, error: PageFormatError) -> None:
        """Records a link the scan did not follow, so writes refuse it and ``check()`` lists it."""
        self.links[rel] = error.message
        self.problems.append(error.message)


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
        try:
            with open_file(self.root, rel) as file:
                info = os.fstat(file.fileno())
                key = (info.st_mtime_ns, info.st_size, info.st_ino)
                cached = self._cache.get(rel)
                if cached is not None and cached[0] == key and cached[1].id == page_id:
                    return cached[1]
                text = file.read().decode("utf-8")
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
            directory = page_type.directory
            try:
                names, links = _markdown_files(self.root, directory)
            except PageFormatError as error:
                snapshot.refuse(directory, error)
                continue
            for name in links:
                if directory or name not in ROOT_FILES:  # the root's own files are _stray's
                    rel = f"{directory}/{name}" if directory else name
                    snapshot.refuse(rel, link_refused(rel, folder=False))
            for name in names:
                if not directory and name in ROOT_FILES:
                    continue
                rel = f"{directory}/{name}" if directory else name
                page_id = self.id_for_path(rel)
                if page_id is None:
                    snapshot.problems.append(f"{rel}: its name makes no slug, so it is no page")
                    continue
                if not directory and parse_id(page_id)[1] in RESERVED_ROOT_SLUGS:
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
            if entry.name in ROOT_FILES and entry.is_symlink():
                snapshot.refuse(entry.name, link_refused(entry.name, folder=False))
            elif entry.is_dir(follow_symlinks=False):
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


def _markdown_files(root: Path, directory: str) -> tuple[list[str], list[str]]:
    """The markdown files of a folder below ``root``, and the links named like them, each sorted.

    Raises:
        PageFormatError: the folder is a link.
    """
    try:
        folder_fd = open_folder(root, directory)
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    try:
        entries = list(os.scandir(folder_fd))
    finally:
        os.close(folder_fd)
    names: list[str] = []
    links: list[str] = []
    for entry in entries:
        if not entry.name.endswith(".md") or entry.name.startswith("."):
            continue
        if entry.is_symlink():
            links.append(entry.name)
        elif entry.is_file(follow_symlinks=False):
            names.append(entry.name)
    return sorted(names), sorted(links)
