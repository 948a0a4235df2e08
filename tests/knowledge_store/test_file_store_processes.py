"""FileKnowledgeStore shared by processes: writers in two processes lose no update, and a
create_many killed by SIGKILL halfway is whole on the next open and can be run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chamvi.knowledge_store import FileKnowledgeStore
from chamvi.knowledge_store._journal import JOURNAL_FILE
from tests.knowledge_store._writer import knots

ROOT = Path(__file__).resolve().parents[2]


def writer(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.knowledge_store._writer", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def said(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()


@pytest.mark.timeout(600)
async def test_two_processes_editing_one_page_200_times_each_lose_no_edit(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    await store.create("concept", "log", "Log", "Edits:\nEND")
    writers = [writer("edit", str(tmp_path), tag, "200") for tag in ("a", "b")]
    try:
        assert [said(w) for w in writers] == ["ready", "ready"]
        for w in writers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        assert [w.wait(timeout=550) for w in writers] == [0, 0]
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
    page = await store.read("concept/log")
    assert page is not None
    lines = page.content.splitlines()
    assert (lines[0], lines[-1], len(lines)) == ("Edits:", "END", 402)
    assert sorted(lines[1:-1]) == sorted(f"{tag}-{n}" for tag in "ab" for n in range(200))
    for tag in "ab":  # each writer's edits in its own order
        own = [line for line in lines if line.startswith(f"{tag}-")]
        assert own == [f"{tag}-{n}" for n in range(200)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("stop", "found"),
    [(150, 300), (0, 0)],
    ids=["killed-halfway-through-the-pages", "killed-before-the-journal"],
)
async def test_a_create_many_killed_midway_is_all_or_none_on_next_open_and_a_retry_succeeds(
    tmp_path: Path, stop: int, found: int
) -> None:
    wiki = tmp_path / "wiki"
    child = writer("create-many", str(wiki), "300", str(stop))
    try:
        assert said(child) == "paused"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    on_disk = sorted((wiki / "concepts").glob("*.md")) if (wiki / "concepts").is_dir() else []
    assert len(on_disk) == stop  # the kill landed where it was meant to
    assert (wiki / JOURNAL_FILE).exists() == (stop > 0)

    store = FileKnowledgeStore(wiki)  # a new process would open it just so
    assert len(await store.list()) == found  # the batch is whole, or absent: never half
    assert not (wiki / JOURNAL_FILE).exists()
    ids = [f"concept/knot-{n:03d}" for n in range(300)]
    assert await store.create_many(knots(300)) == ids  # the same call again
    assert [p.id for p in await store.list()] == ids
    report = await store.check()
    assert report.broken_links == [] and report.problems == []
    assert (wiki / "index.md").read_text().count("(concepts/knot-") == 300
    assert not [p for p in wiki.rglob(".*")], "no journal or temporary file is left behind"
