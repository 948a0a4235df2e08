"""A file store's way with files: read and replace them inside its folder, never through a link."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from pathlib import Path
from typing import BinaryIO

from chamvi.errors import PageFormatError

INDEX_FILE = "index.md"
LOG_FILE = "log.md"
OVERVIEW_FILE = "overview.md"
ROOT_FILES = (INDEX_FILE, LOG_FILE, OVERVIEW_FILE)
RESERVED_ROOT_SLUGS = frozenset(name.removesuffix(".md") for name in ROOT_FILES)

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
