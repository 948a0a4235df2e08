"""``chamvi kb index`` / ``read`` / ``search`` / ``check``: an agent's wiki, seen from the terminal.

These commands read the folder of a :class:`~chamvi.knowledge_store.FileKnowledgeStore` directly
(no Temporal, no worker) and never write to it. Every sub-folder holding pages is read as a page
type (the app's own types included); ``--root-type`` names the type of pages directly in the root
folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from chamvi.cli._common import json_option
from chamvi.cli._output import columns, echo_err, short
from chamvi.knowledge_store import (
    BUILT_IN_PAGE_TYPES,
    FileKnowledgeStore,
    KnowledgeStoreError,
    PageType,
    is_slug,
)
from chamvi.knowledge_store._frontmatter import split as split_front_matter
from chamvi.knowledge_store.tools import format_page

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _dir_option(function: F) -> F:
    function = click.option(
        "--root-type",
        envvar="CHAMVI_KB_ROOT_TYPE",
        show_envvar=True,
        metavar="TYPE",
        help="The page type of files directly in the folder [default: they are no pages].",
    )(function)
    return click.option(
        "--dir",
        "directory",
        envvar="CHAMVI_KB_DIR",
        show_envvar=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="The knowledge base's folder (a FileKnowledgeStore).",
    )(function)


def _open(directory: Path | None, root_type: str | None) -> FileKnowledgeStore:
    if directory is None:
        raise click.ClickException("which knowledge base? Give --dir DIR or set CHAMVI_KB_DIR")
    if not directory.is_dir():
        raise click.ClickException(f"no knowledge base at {str(directory)!r}: the folder does not exist")
    if root_type is not None and not is_slug(root_type):
        raise click.ClickException(
            f"--root-type {root_type!r} is invalid: use lowercase letters and digits joined by single hyphens"
        )
    # the built-in types' folders in either layout (concept/, concepts/) are the store's already
    built_in = {t.folder_in(plural=plural) for t in BUILT_IN_PAGE_TYPES for plural in (True, False)}
    types = [
        PageType(name=child.name, description=f"Pages in {child.name}/.")
        for child in sorted(directory.iterdir())
        if child.is_dir()
        and is_slug(child.name)
        and child.name not in built_in
        and child.name != root_type
        and not _typed(child)
    ]
    if root_type is not None:
        types.append(PageType(name=root_type, description="Pages in the root folder.", folder=""))
    try:
        return FileKnowledgeStore(directory, page_types=types)
    except KnowledgeStoreError as error:
        raise click.ClickException(error.message) from None


def _typed(folder: Path) -> bool:
    """Whether the pages of ``folder`` name their type (``type: topic``), as agent-kit's do.

    Such a folder is no type of its own: the store reads each page as the type it names.
    """
    for page in sorted(folder.glob("*.md")):
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
            front, _ = split_front_matter(page.read_text(encoding="utf-8"))
            if front is not None and "type" in front:
                return True
    return False


def _run(operation: Awaitable[T]) -> T:
    try:
        return asyncio.run(_awaited(operation))
    except KnowledgeStoreError as error:
        raise click.ClickException(error.message) from None


async def _awaited(operation: Awaitable[T]) -> T:
    return await operation


@click.group()
def kb() -> None:
    """An agent's knowledge base (a folder of linked markdown pages): index, read, search, check.

    Point at the folder with --dir or CHAMVI_KB_DIR. Nothing here writes to it.
    """


@kb.command("index")
@_dir_option
def index(directory: Path | None, root_type: str | None) -> None:
    """Prints the catalogue of live pages, linked by id."""
    store = _open(directory, root_type)
    click.echo(_run(store.index()).rstrip("\n"))


@kb.command("read")
@click.argument("page_id", metavar="ID")
@_dir_option
def read(page_id: str, directory: Path | None, root_type: str | None) -> None:
    """Prints page ID (e.g. concept/refunds), or `overview`, or `log` (the latest entries)."""
    store = _open(directory, root_type)
    if page_id == "overview":
        click.echo(_run(store.overview()).rstrip("\n") or "(the overview is empty)")
        return
    if page_id == "log":
        entries = _run(store.recent_log(20))
        click.echo("\n".join(entries) if entries else "(the log is empty)")
        return
    page = _run(store.read(page_id))
    if page is None:
        raise click.ClickException(
            f"no page {page_id!r} in {str(store.directory)!r}: `chamvi kb index` lists them"
        )
    click.echo(format_page(page).rstrip("\n"))


@kb.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True)
@json_option()
@_dir_option
def search(query: str, limit: int, as_json: bool, directory: Path | None, root_type: str | None) -> None:
    """Finds the live pages that best match QUERY, by keywords."""
    store = _open(directory, root_type)
    hits = _run(store.search(query, limit))
    if as_json:
        click.echo(json.dumps([asdict(h) for h in hits], indent=2, ensure_ascii=False))
        return
    if not hits:
        echo_err(f"no page matches {query!r}")
        return
    rows = [["SCORE", "ID", "TITLE", "SNIPPET"]]
    rows += [[f"{h.score:.2f}", h.id, short(h.title, 40), short(h.snippet, 80)] for h in hits]
    for line in columns(rows):
        click.echo(line)


@kb.command("check")
@json_option()
@_dir_option
def check(as_json: bool, directory: Path | None, root_type: str | None) -> None:
    """Reports broken links, orphan pages, links to retired pages and unreadable files.

    Exits non-zero when a link is broken (orphans and links to retired pages are advice).
    """
    store = _open(directory, root_type)
    report = _run(store.check())
    pages = len(_run(store.list()))
    if as_json:
        click.echo(json.dumps({**asdict(report), "ok": report.ok}, indent=2, ensure_ascii=False))
    else:
        sections = [
            ("broken links", [f"{link.source} -> {link.target}" for link in report.broken_links]),
            ("links to retired pages", [f"{link.source} -> {link.target}" for link in report.retired_links]),
            ("orphan pages (no other page links to them)", report.orphans),
            ("files that are no pages", report.problems),
        ]
        for title, lines in sections:
            if lines:
                click.echo(f"{title}:")
                for line in lines:
                    click.echo(f"  {line}")
        if report.clean:
            click.echo(f"{pages} page(s), nothing to fix")
    if not report.ok:
        raise click.ClickException(
            f"{len(report.broken_links)} broken link(s): link pages that exist, or create the missing ones"
        )
