"""How a file store lays pages out in its folder, and reads a folder (hand-written or not) back as pages."""

from __future__ import annotations

import os
import posixpath
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from chamvi.errors import InvalidPageError, PageFormatError
from chamvi.knowledge_store import _frontmatter
from chamvi.knowledge_store._disk import (
    RESERVED_ROOT_SLUGS,
    ROOT_FILES,
    link_refused,
    normal_content,
    open_file,
    open_folder,
)
from chamvi.knowledge_store._ids import (
    is_id,
    is_slug,
    make_id,
    map_links,
    parse_id,
    slugify,
    split_anchor,
    target_id,
)
from chamvi.knowledge_store._types import (
    PLURAL_FOLDERS,
    RETIRED,
    SUPERSEDED,
    FieldValue,
    KnowledgePage,
    PageType,
    status_of,
)

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# the notice of a superseded or retired page: chamvi's older one, then agent-kit's
_NOTICE = re.compile(r"> (\*\*(Superseded|Retired)\*\*|(Superseded|Retired) on )")
_HEADING = re.compile(r"#[ \t]+(.+?)[ \t#]*$")


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
    """One folder per page type, a root-folder type if one is declared, in one of two layouts.

    Agent-kit's layout (new stores): built-in types in plural folders (``concepts/refunds.md``),
    ``type:`` first in every page's front matter, ``superseded_by`` kept as a relative file path.
    The older singular layout (``concept/refunds.md``) is read and written as it is: a folder
    keeps it while it has a singular built-in folder and no plural one (see :meth:`detect`).

    A file directly in the root folder is a page of the type declared with ``folder=""`` (in
    agent-kit's layout only when its front matter says ``type: <that type>``). A file whose front
    matter names a type in ``type:``, in a folder no declared type owns (or in the root folder),
    is a page of that type: a type is a label, so pages of types this app did not declare are
    listed, read and searched all the same. Other files are no pages (``check()`` lists them).
    ``index.md``, ``log.md`` and ``overview.md`` in the root folder are the store's own.
    """

    def __init__(self, root: Path, types: tuple[PageType, ...]) -> None:
        self.root = root
        self.types = types
        self.by_name = {t.name: t for t in types}
        self.plural = True
        self._folders = {plural: {t.folder_in(plural=plural): t for t in types} for plural in (True, False)}
        self.root_type = self._folders[True].get("")
        # built-in types at their default folder: the folders that tell the two layouts apart
        self._telling = [t for t in types if t.folder is None and t.name in PLURAL_FOLDERS]
        self._labels: dict[str, str] = {}
        """Paths of pages whose type is a label (no declared type owns their folder), with their ids."""
        self._cache: dict[str, tuple[tuple[object, ...], KnowledgePage]] = {}

    @property
    def by_folder(self) -> dict[str, PageType]:
        """The declared types by their folder in the current layout."""
        return self._folders[self.plural]

    def detect(self) -> None:
        """Chooses the layout from the folders on disk, again before every scan.

        A folder with a built-in type's singular folder (``concept/``) and none of the plural ones
        (``concepts/``) is in the singular layout; any other, an empty or a new one included, is in
        agent-kit's.
        """

        def has(name: str) -> bool:
            try:
                return stat.S_ISDIR(os.stat(self.root / name, follow_symlinks=False).st_mode)
            except OSError:
                return False

        plural = any(has(t.folder_in(plural=True)) for t in self._telling)
        singular = any(has(t.folder_in(plural=False)) for t in self._telling)
        self.plural = plural or not singular

    # -- paths and links ---------------------------------------------------------------------------

    def default_path(self, page_id: str) -> str | None:
        page_type, slug = parse_id(page_id)
        known = self.by_name.get(page_type)
        if known is None:
            return None
        directory = known.folder_in(plural=self.plural)
        return f"{directory}/{slug}.md" if directory else f"{slug}.md"

    def label_path(self, page_id: str, snapshot: Snapshot) -> str:
        """Where a new page of a type no declared type names goes, its front matter saying its type.

        Beside the pages of that type already there (the first one's folder, in path order), else in
        a folder named after the type; the scan reads it back as a page of that type.

        Raises:
            InvalidPageError: that folder is a declared type's (in either layout: writing a page there
                would make it a page of the other type), or the page would take one of the root
                folder's own file names.
        """
        page_type, slug = parse_id(page_id)
        folders = sorted(
            posixpath.dirname(entry.path) for entry in snapshot.pages.values() if entry.page.type == page_type
        )
        folder = folders[0] if folders else page_type
        if not folders:
            owners = {t.folder_in(plural=plural): t.name for t in self.types for plural in (True, False)}
            if folder in owners:
                raise InvalidPageError(
                    f"page type {page_type!r} is not declared, and its folder {folder}/ is where "
                    f"{owners[folder]!r} pages live: choose another type, or declare "
                    f"PageType(name={page_type!r}, folder=...) with a folder of its own"
                )
        if not folder and slug in RESERVED_ROOT_SLUGS:
            raise InvalidPageError(
                f"slug {slug!r} is taken by the store's own {slug}.md: choose another slug"
            )
        return f"{folder}/{slug}.md" if folder else f"{slug}.md"

    def id_for_path(self, rel: str) -> str | None:
        """The page id of a file path relative to the root, or None when no page lives there."""
        if rel in self._labels:
            return self._labels[rel]
        if not rel.endswith(".md"):
            return None
        folder, _, name = rel.rpartition("/")
        if "/" in folder or (not folder and name in ROOT_FILES):
            return None
        page_type = self.by_folder.get(folder)
        if page_type is None:
            return None
        slug = _slug_of(name)
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
        fields: dict[str, FieldValue] = {"type": page.type, "title": page.title, **page.fields}
        by = fields.get("superseded_by")
        if self.plural and isinstance(by, str) and is_id(by):
            # agent-kit keeps the replacement as a file path, relative to this page's folder
            path = paths.get(by) or self.default_path(by)
            if path is not None:
                fields["superseded_by"] = posixpath.relpath(path, folder or ".")
        blocks = [f"# {page.title}"]
        notice = page.notice
        if notice is not None:
            blocks.insert(0, self.to_disk(notice, folder, paths))
        body = self.to_disk(page.content, folder, paths).rstrip("\n")
        if body:
            blocks.append(body)
        return _frontmatter.render(fields) + "\n" + "\n\n".join(blocks) + "\n"

    def parse(self, rel: str, page_id: str, text: str) -> KnowledgePage:
        front, body = _split(rel, text)
        fields: dict[str, FieldValue] = dict(front or {})
        title_field = fields.pop("title", None)
        fields.pop("type", None)  # the id says it
        folder = posixpath.dirname(rel)
        by = fields.get("superseded_by")
        if isinstance(by, str) and by.endswith(".md"):
            fields["superseded_by"] = self.target_from_disk(by, folder) or by
        lines = body.replace("\r\n", "\n").split("\n")
        _drop_blank(lines)
        notice: list[str] = []
        if status_of(fields) in (SUPERSEDED, RETIRED) and lines and _NOTICE.match(lines[0]):
            while lines and lines[0].startswith(">"):
                notice.append(lines.pop(0).rstrip())
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
        content = self.from_disk(normal_content("\n".join(lines)), folder)
        return KnowledgePage(
            id=page_id,
            type=parse_id(page_id)[0],
            title=title,
            content=content,
            fields=fields,
            notice_text=self.from_disk("\n".join(notice), folder) if notice else None,
        )

    def read_page(self, rel: str, page_id: str | None) -> KnowledgePage | None:
        """The page in file ``rel``; with no ``page_id``, the one its front matter's ``type:`` names.

        Returns:
            The page, or None when ``page_id`` is None and the file names no type.

        Raises:
            PageFormatError: the file cannot be read as a page.
        """
        try:
            with open_file(self.root, rel) as file:
                info = os.fstat(file.fileno())
                # links read differently in the other layout, or once a label page appears
                key = (info.st_mtime_ns, info.st_size, info.st_ino, self.plural, tuple(self._labels.items()))
                cached = self._cache.get(rel)
                if cached is not None and cached[0] == key and page_id in (None, cached[1].id):
                    return cached[1]
                text = file.read().decode("utf-8")
        except UnicodeDecodeError:
            raise PageFormatError(f"{rel}: not UTF-8 text") from None
        except OSError as error:
            raise PageFormatError(f"{rel}: cannot be read ({error.strerror or error})") from None
        if page_id is None:
            page_id = self._labelled(rel, text)
            if page_id is None:
                return None
        page = self.parse(rel, page_id, text)
        self._cache[rel] = (key, page)
        return page

    def _labelled(self, rel: str, text: str) -> str | None:
        """The id of a file by its front matter's ``type:`` and its name, None without a type."""
        front, _ = _split(rel, text)
        page_type = (front or {}).get("type")
        if not isinstance(page_type, str) or not page_type.strip():
            return None
        if not is_slug(page_type.strip()):
            raise PageFormatError(
                f"{rel}: type {page_type!r} is no page type name: use lowercase letters and digits "
                "joined by single hyphens"
            )
        slug = _slug_of(rel.rpartition("/")[2])
        return make_id(page_type.strip(), slug) if slug else None

    def scan(self) -> Snapshot:
        """Reads the folder: every page file, and a problem for each file that is not one."""
        self.detect()
        snapshot = Snapshot()
        if not self.root.is_dir():
            self._labels = {}
            return snapshot
        placed: list[str] = []  # files whose folder says their type
        loose: list[str] = []  # files whose front matter must say it
        for page_type in self.types:
            directory = page_type.folder_in(plural=self.plural)
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
                if not directory and (name in ROOT_FILES or _slug_of(name) in RESERVED_ROOT_SLUGS):
                    continue
                rel = f"{directory}/{name}" if directory else name
                # agent-kit's root-folder pages say their type: other notes may share the root
                (loose if not directory and self.plural else placed).append(rel)
        root_files, stray_folders = self._stray(snapshot)
        loose += root_files + [rel for rels in stray_folders.values() for rel in rels]
        labels: dict[str, str] = {}
        for rel in loose:
            page_id = self._label_id(rel, snapshot)
            if page_id is not None:
                labels[rel] = page_id
        self._labels = labels
        for folder, rels in stray_folders.items():
            if not rels or any(rel not in labels for rel in rels):
                snapshot.problems.append(
                    f"{folder}/: no page type keeps its pages in this folder, so its files are no pages "
                    "unless their front matter names their type ('type: note')"
                )
        for rel in placed + list(labels):
            page_id = self.id_for_path(rel)
            if page_id is None:
                snapshot.problems.append(f"{rel}: its name makes no slug, so it is no page")
                continue
            if snapshot.exists(page_id):
                other = snapshot.pages[page_id].path if page_id in snapshot.pages else "another file"
                snapshot.problems.append(f"{rel}: same page id {page_id!r} as {other}, so it is ignored")
                continue
            try:
                page = self.read_page(rel, page_id)
            except PageFormatError as error:
                snapshot.unreadable[page_id] = error.message
                snapshot.problems.append(error.message)
                continue
            assert page is not None
            snapshot.pages[page_id] = Entry(rel, page)
        return snapshot

    def _label_id(self, rel: str, snapshot: Snapshot) -> str | None:
        """The id of a file outside its type's folder, from its front matter's ``type:``."""
        try:
            page = self.read_page(rel, None)
        except PageFormatError as error:
            snapshot.problems.append(error.message)
            return None
        if page is None and "/" not in rel:
            snapshot.problems.append(
                f"{rel}: a file directly in the root folder is no page unless "
                + (
                    f"its front matter says 'type: {self.root_type.name}'"
                    if self.root_type is not None
                    else "its front matter names its type ('type: note') or a page type is declared "
                    "with folder=''"
                )
            )
        return page.id if page is not None else None

    def _stray(self, snapshot: Snapshot) -> tuple[list[str], dict[str, list[str]]]:
        """Root files when no type lives in the root, and the folders no declared type owns.

        Returns:
            Those root files, and each such folder with its markdown files.
        """
        files: list[str] = []
        folders: dict[str, list[str]] = {}
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            name = entry.name
            if name.startswith("."):
                continue
            if name in ROOT_FILES and entry.is_symlink():
                snapshot.refuse(name, link_refused(name, folder=False))
            elif entry.is_dir(follow_symlinks=False):
                if name not in self.by_folder:
                    folders[name] = [f"{name}/{file}" for file in _markdown_files(self.root, name)[0]]
            elif (
                self.root_type is None
                and name.endswith(".md")
                and name not in ROOT_FILES
                and _slug_of(name) not in RESERVED_ROOT_SLUGS
                and entry.is_file(follow_symlinks=False)
            ):
                files.append(name)
        return files, folders


def _split(rel: str, text: str) -> tuple[dict[str, FieldValue] | None, str]:
    try:
        return _frontmatter.split(text)
    except _frontmatter.FrontMatterError as error:
        raise PageFormatError(f"{rel}: {error} (this store reads plain 'key: value' front matter)") from None


def _slug_of(name: str) -> str:
    """The slug a file name gives: its stem when that is one, else the stem made into one."""
    stem = name.removesuffix(".md")
    return stem if is_slug(stem) else slugify(stem)


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
