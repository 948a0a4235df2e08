"""Another process on a wiki folder, for the cross-process tests of FileKnowledgeStore.

``python -m tests.knowledge_store._writer edit DIR TAG COUNT``: says ``ready``, waits for a line on
stdin (so that two writers start together), then makes COUNT edits to ``concept/log``, each
adding the line ``TAG-<n>`` before ``END``.

``python -m tests.knowledge_store._writer create-many DIR COUNT STOP``: runs ``create_many`` of
:func:`knots` (COUNT pages) and, after writing page number STOP (0: just before its journal),
says ``paused`` and waits to be killed, so the test's SIGKILL lands exactly there.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from chamvi.knowledge_store import FileKnowledgeStore, NewPage, _disk, _journal


def knots(count: int) -> list[NewPage]:
    """Pages that link in a ring, so none of them can be written before the others exist."""
    return [
        NewPage(
            "concept",
            f"knot-{n:03d}",
            f"Knot {n}",
            f"Knot {n} leads to [the next one](concept/knot-{(n + 1) % count:03d}).",
        )
        for n in range(count)
    ]


async def edit(directory: Path, tag: str, count: int) -> None:
    store = FileKnowledgeStore(directory)
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(count):
        await store.edit("concept/log", "END", f"{tag}-{n}\nEND")


def pause_at(stop: int) -> None:
    """Makes the store's batch writes stop for good at page ``stop`` (0: before the journal)."""
    write = _disk.atomic_write
    written = 0

    def pausing(root: Path, rel: str, text: str) -> None:
        nonlocal written
        if stop == 0 and rel == _journal.JOURNAL_FILE:
            wait_to_be_killed()
        write(root, rel, text)
        if rel.startswith("concepts/"):
            written += 1
            if written == stop:
                wait_to_be_killed()

    _journal.atomic_write = pausing  # type: ignore[attr-defined]


def wait_to_be_killed() -> None:
    print("paused", flush=True)
    while True:
        time.sleep(60)


def main(argv: list[str]) -> None:
    mode, directory = argv[0], Path(argv[1])
    if mode == "edit":
        asyncio.run(edit(directory, argv[2], int(argv[3])))
    elif mode == "create-many":
        pause_at(int(argv[3]))
        asyncio.run(FileKnowledgeStore(directory).create_many(knots(int(argv[2]))))
        print("finished without pausing", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}: use edit or create-many")


if __name__ == "__main__":
    main(sys.argv[1:])
