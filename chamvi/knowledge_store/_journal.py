"""What keeps a file store whole when several processes write it, and when one of them is killed.

Every operation holds ``flock`` on the store's folder itself (shared to read, exclusive to write),
so worker replicas writing one wiki folder take turns and lose no update to each other; a lock
on the folder leaves no lock file behind, and the kernel drops it when a holder dies.

A write of several files (pages and the index) first writes all of them, as they will be, into
one journal file, then the files, then removes the journal. A process killed in between leaves
the journal, and the next operation on the folder, in any process, writes its files again before
anything else: the batch is all there or none of it, never half.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from chamvi.errors import PageFormatError
from chamvi.knowledge_store._disk import atomic_write, read_text

JOURNAL_FILE = ".chamvi-journal.json"
"""The journal of a batch of writes under way, in the store's folder (hidden: no page)."""

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


@contextlib.contextmanager
def folder_lock(root: Path, *, exclusive: bool) -> Iterator[None]:
    """Holds ``flock`` on ``root``: shared for readers, exclusive (and the folder made) for writers.

    A reader of a folder that does not exist yet has nothing to wait for: it reads nothing.
    """
    if exclusive:
        root.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(root, _DIRECTORY)
    except FileNotFoundError:
        if exclusive:
            raise
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def pending(root: Path) -> bool:
    """Whether a batch of writes was cut short in ``root`` (its journal is still there)."""
    return os.path.lexists(root / JOURNAL_FILE)


def write_all(root: Path, files: dict[str, str]) -> None:
    """Writes ``files`` (paths relative to ``root``): all of them, even if this process is killed.

    One file is replaced atomically on its own; several go through the journal. Call it under the
    exclusive :func:`folder_lock`.
    """
    if len(files) == 1:
        [(rel, text)] = files.items()
        atomic_write(root, rel, text)
        return
    if not files:
        return
    atomic_write(root, JOURNAL_FILE, json.dumps({"files": files}, ensure_ascii=False))
    _apply(root, files)


def recover(root: Path) -> None:
    """Finishes a batch of writes a killed process left in ``root``; nothing when there is none.

    Call it under the exclusive :func:`folder_lock`, before reading the folder.

    Raises:
        PageFormatError: the journal is not one this store wrote.
    """
    text = read_text(root, JOURNAL_FILE)
    if text is None:
        return
    try:
        files = json.loads(text)["files"]
        if not isinstance(files, dict) or not all(
            isinstance(rel, str) and _inside(rel) and isinstance(body, str) for rel, body in files.items()
        ):
            raise ValueError("not a map of file paths inside the folder to their text")
    except (ValueError, KeyError, TypeError) as error:
        raise PageFormatError(
            f"{JOURNAL_FILE}: the journal of an unfinished write cannot be read ({error}): "
            "remove it to drop that write"
        ) from None
    _apply(root, files)


def _apply(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        atomic_write(root, rel, text)
    os.unlink(root / JOURNAL_FILE)


def _inside(rel: str) -> bool:
    """Whether ``rel`` names a file in the folder or in one folder below it, and nowhere else."""
    parts = rel.split("/")
    return 1 <= len(parts) <= 2 and all(part and part not in (".", "..") for part in parts)
