"""What cross-process safety costs ``FileKnowledgeStore``: the folder lock and the journal.

Usage: ``python bench/kb_store.py`` (about half a minute), ``python bench/kb_store.py --quick``.

Each figure is timed twice in the same process on the same kind of folder: once with the store as
it is (``flock`` on the folder around every operation, a journal for every write of several files),
and once with both taken out (the per-process lock only, the files written one by one), which is
how the store wrote before. Then two processes edit one page at once, against one process making
as many edits alone. Benchmarks are not tests: nothing here fails on a bad ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import ratio, table

import chamvi.knowledge_store.files as files_module
from chamvi.knowledge_store import FileKnowledgeStore, NewPage
from chamvi.knowledge_store._disk import atomic_write


def pages(count: int, prefix: str) -> list[NewPage]:
    return [
        NewPage(
            "concept",
            f"{prefix}-{n:03d}",
            f"{prefix} {n}",
            f"Page {n}: [next](concept/{prefix}-{(n + 1) % count:03d}).",
        )
        for n in range(count)
    ]


@contextlib.contextmanager
def unsafe() -> Iterator[None]:
    """The store without the folder lock and the journal, as it was before them."""
    names = ("folder_lock", "write_all", "pending")
    saved = {name: vars(files_module)[name] for name in names}

    def write_one_by_one(root: Path, files: dict[str, str]) -> None:
        for rel, text in files.items():
            atomic_write(root, rel, text)

    vars(files_module).update(
        folder_lock=lambda root, exclusive: contextlib.nullcontext(),
        write_all=write_one_by_one,
        pending=lambda root: False,
    )
    try:
        yield
    finally:
        vars(files_module).update(saved)


async def edits(directory: Path, count: int, tag: str) -> float:
    """Seconds for ``count`` edits of ``concept/log`` in a folder of 50 other pages."""
    store = FileKnowledgeStore(directory)
    started = time.perf_counter()
    for n in range(count):
        await store.edit("concept/log", "END", f"{tag}-{n}\nEND")
    return time.perf_counter() - started


async def prepared(directory: Path) -> None:
    store = FileKnowledgeStore(directory)
    await store.create_many(pages(50, "other"))
    await store.create("concept", "log", "Log", "Edits:\nEND")


def edit_in_a_process(directory: str, count: int, tag: str, ready: Any) -> None:
    ready.wait()  # a multiprocessing Barrier: both processes imported and waiting, and the timer
    asyncio.run(edits(Path(directory), count, tag))


async def main(quick: bool) -> None:
    count = 40 if quick else 200
    batch = 60 if quick else 300
    rounds = 1 if quick else 3
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        timing: dict[str, list[float]] = {
            "edit safe": [],
            "edit before": [],
            "many safe": [],
            "many before": [],
        }
        for number in range(rounds):
            for kind in ("safe", "before"):
                folder = root / f"{kind}-{number}"
                await prepared(folder)
                with unsafe() if kind == "before" else contextlib.nullcontext():
                    timing[f"edit {kind}"].append(await edits(folder, count, "a") / count)
                    started = time.perf_counter()
                    await FileKnowledgeStore(folder).create_many(pages(batch, "knot"))
                    timing[f"many {kind}"].append(time.perf_counter() - started)
        edit_safe, edit_before = (statistics.median(timing[f"edit {k}"]) for k in ("safe", "before"))
        many_safe, many_before = (statistics.median(timing[f"many {k}"]) for k in ("safe", "before"))
        rows.append(
            ["one edit (page and index)", edit_safe * 1000, edit_before * 1000, ratio(edit_safe, edit_before)]
        )
        rows.append(
            [
                f"create_many of {batch} pages",
                many_safe * 1000,
                many_before * 1000,
                ratio(many_safe, many_before),
            ]
        )

        alone = root / "alone"
        await prepared(alone)
        alone_seconds = await edits(alone, 2 * count, "a")
        shared = root / "shared"
        await prepared(shared)
        context = multiprocessing.get_context("spawn")
        start = context.Event()
        workers = [
            context.Process(target=edit_in_a_process, args=(str(shared), count, tag, start)) for tag in "ab"
        ]
        for worker in workers:
            worker.start()
        time.sleep(2)  # both interpreters up and waiting
        started = time.perf_counter()
        start.set()
        for worker in workers:
            worker.join()
        shared_seconds = time.perf_counter() - started
        page = await FileKnowledgeStore(shared).read("concept/log")
        kept = len(page.content.splitlines()) - 2 if page is not None else 0
    print(f"chamvi bench/kb_store.py{' --quick' if quick else ''}: Python {platform.python_version()}")
    print()
    print(table(["ms", "with lock and journal", "without (before)", "ratio"], rows))
    print()
    print(
        table(
            ["edits", "seconds", "edits kept", "ratio"],
            [
                [f"{2 * count} by one process", alone_seconds, 2 * count, "1.00x"],
                [
                    f"{count} each by two processes at once",
                    shared_seconds,
                    kept,
                    ratio(shared_seconds, alone_seconds),
                ],
            ],
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: a few seconds")
    asyncio.run(main(parser.parse_args().quick))
