"""``FileKnowledgeStore``: pages as markdown files a person can open, in any editor or on a git host.

On disk, in agent-kit's layout (what its own store writes, and what a new store writes)::

    wiki/
      index.md             the catalogue, rewritten whenever a page changes
      log.md               ## [YYYY-MM-DD] operation | what, then "- pages: a, b"; oldest first
      overview.md          the overview page
      concepts/refunds.md  one folder per page type (summaries/, concepts/, entities/, syntheses/,
      summaries/...        preferences/; a declared type's folder= or its name), one file per page

A page file has a small front matter (``type``, ``title``, ``status``, ``created``, ``updated``, a
summary's ``file`` and ``ingested``, fields of your own such as ``aliases``), then the notice of a
superseded or retired page ("> Superseded on DATE (reason): see [Title](../concepts/new.md)."),
then ``# Title``, then the content. Links between pages, and ``superseded_by``, are written as
relative paths (``[Refunds](../concepts/refunds.md)``) and read back as ids
(``[Refunds](concept/refunds)``).

A folder chamvi wrote before it used agent-kit's layout keeps its singular folders
(``concept/refunds.md``): it is read and written as it is, for as long as it has a singular
built-in folder and no plural one.

An existing folder written by hand reads as pages too: files without front matter (the first ``#``
heading is the title), relative links, and files directly in the root folder, which are pages of the
type declared with ``folder=""`` (in agent-kit's layout when their front matter says that ``type:``).
A file whose front matter names its ``type:`` outside the declared types' folders is a page of that
type: a type is a label, so such pages are listed, read, searched and edited in place, though
``create`` only makes pages of declared types.

Symbolic links inside the folder are never followed, so the store reads and writes nothing outside
it: a linked type folder, page file, ``index.md``, ``log.md`` or ``overview.md`` is no page,
``check()`` lists it, and reading or writing through it fails with an error that names it.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from chamvi.errors import (
    InvalidPageError,
    KnowledgeStoreError,
    PageExistsError,
    PageFormatError,
    PageNotFoundError,
    PageStatusError,
)
from chamvi.knowledge_store._disk import (
    INDEX_FILE,
    LOG_FILE,
    OVERVIEW_FILE,
    RESERVED_ROOT_SLUGS,
    atomic_write,
    lock_for,
    normal_content,
    read_text,
)
from chamvi.knowledge_store._ids import make_id, parse_id
from chamvi.knowledge_store._journal import folder_lock, pending, recover, write_all
from chamvi.knowledge_store._layout import Entry, Layout, Snapshot
from chamvi.knowledge_store._rules import (
    STORE_TIMES,
    apply_fields,
    check_fields,
    check_links,
    check_log_entry,
    check_report,
    check_slug,
    check_title,
    keyword_search,
    link_problems,
    linked_from,
    now_iso,
    raise_link_problems,
    render_index,
    replace_once,
    type_of_new_page,
)
from chamvi.knowledge_store._types import (
    ACTIVE,
    RETIRED,
    SUPERSEDED,
    CheckReport,
    FieldChanges,
    FieldValue,
    KnowledgePage,
    NewPage,
    PageInfo,
    PageType,
    SearchHit,
    resolve_page_types,
    with_notice,
    without_notice,
)

T = TypeVar("T")

_LOG_ENTRY = re.compile(r"## (\[\d{4}-\d{2}-\d{2}\] .+?)\s*$")
_LOG_PAGE = re.compile(r"[-*] \[[^\]]*\]\(([^)\s]+)\)")
_LOG_PAGES = re.compile(r"[-*] pages: (.*)")
_LOG_HEADER = "# Log\n"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class FileKnowledgeStore:
    """A knowledge store over a folder of markdown files (created on the first write).

    Args:
        directory: the store's folder.
        page_types: the app's page types, on top of the built-ins (same name replaces one).
        clock: the store's clock (tests pass their own); times are written in UTC.

    Writers never lose an update to each other, in one process or in several (worker replicas on
    one folder): every operation holds a lock on the folder (``flock``, shared to read, exclusive
    to write) and files are replaced atomically. A write of several files (``create_many``, a page
    and the index) goes through a journal, so a process killed in the middle leaves all of it or
    none for the next operation to see; running the same ``create_many`` again then answers the
    pages it made. Search is by keywords (agent-kit's: see
    :func:`~chamvi.knowledge_store._rules.keyword_search`); wrap the store in
    :class:`~chamvi.knowledge_store.VectorKnowledgeStore` to search by meaning.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        page_types: Sequence[PageType] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.directory = Path(os.path.abspath(os.fspath(directory)))
        self._types = resolve_page_types(page_types)
        self._layout = Layout(self.directory, self._types)
        self._lock = lock_for(self.directory)
        self._clock = clock or _utc_now

    def __repr__(self) -> str:
        return f"FileKnowledgeStore({str(self.directory)!r})"

    def types(self) -> tuple[PageType, ...]:
        """The built-in page types and the app's, each with the folder its pages live in."""
        return self._types

    async def _run(self, operation: Callable[..., T], *args: Any, write: bool = False) -> T:
        return await asyncio.to_thread(self._locked, write, operation, *args)

    def _locked(self, write: bool, operation: Callable[..., T], *args: Any) -> T:
        with self._lock:  # threads of this process; folder_lock orders processes
            exclusive = write
            while True:
                with folder_lock(self.directory, exclusive=exclusive):
                    if pending(self.directory):
                        if not exclusive:  # finishing a killed writer's batch needs the folder alone
                            exclusive = True
                            continue
                        recover(self.directory)
                    return operation(*args)

    # -- reading ----------------------------------------------------------------------------------

    async def list(self) -> builtins.list[PageInfo]:
        """Every page but the retired ones, by id, read from the folder as it is now."""
        return await self._run(self._list)

    def _list(self) -> builtins.list[PageInfo]:
        pages = self._layout.scan().pages
        return [pages[i].page.info() for i in sorted(pages) if pages[i].page.status != RETIRED]

    async def read(self, page_id: str) -> KnowledgePage | None:
        """The page (retired ones too) with the pages linking to it, or None when there is no such file.

        Raises:
            PageFormatError: the file exists but cannot be read as a page.
        """
        return await self._run(self._read, page_id)

    def _read(self, page_id: str) -> KnowledgePage | None:
        parse_id(page_id)
        snapshot = self._layout.scan()
        if page_id in snapshot.unreadable:
            raise PageFormatError(snapshot.unreadable[page_id])
        entry = snapshot.pages.get(page_id)
        if entry is None:
            return None
        page = entry.page
        return replace(
            page, content=with_notice(page), linked_from=linked_from(_pages(snapshot).values(), page_id)
        )

    async def pages(self) -> builtins.list[KnowledgePage]:
        """Every live page, read in one pass over the folder (``linked_from`` left empty).

        Not part of :class:`KnowledgeStore`: the vector index's source uses it when a store has it.
        """
        return await self._run(self._live_pages)

    def _live_pages(self) -> builtins.list[KnowledgePage]:
        pages = _pages(self._layout.scan())
        return [pages[i] for i in sorted(pages) if pages[i].status != RETIRED]

    async def search(self, query: str, limit: int = 10) -> builtins.list[SearchHit]:
        """The live pages that best match ``query`` by keywords, best first."""
        return await self._run(self._search, query, limit)

    def _search(self, query: str, limit: int) -> builtins.list[SearchHit]:
        return keyword_search(_pages(self._layout.scan()).values(), query, limit)

    async def index(self) -> str:
        """The catalogue of live pages as markdown linked by id (``index.md``, with ids for paths)."""
        return await self._run(lambda: render_index(_pages(self._layout.scan()).values(), self._types))

    async def check(self) -> CheckReport:
        """Broken links, orphan pages, links to retired pages, and files that are no pages."""
        return await self._run(self._check)

    def _check(self) -> CheckReport:
        snapshot = self._layout.scan()
        problems = list(snapshot.problems)
        try:
            overview = self._overview()
        except PageFormatError as error:  # a link, or no regular file: reported, and check() goes on
            overview = ""
            if error.message not in problems:
                problems.append(error.message)
        report = check_report(_pages(snapshot), self._types, overview, snapshot.unreadable)
        return replace(report, problems=problems)

    async def overview(self) -> str:
        """The content of ``overview.md`` with its links as ids, or "" before one is written."""
        return await self._run(self._read_overview)

    def _read_overview(self) -> str:
        self._layout.scan()  # its links read by the folder's layout and the pages in it now
        return self._overview()

    def _overview(self) -> str:
        text = read_text(self.directory, OVERVIEW_FILE)
        return self._layout.from_disk(normal_content(text), "") if text is not None else ""

    async def recent_log(self, limit: int = 10) -> builtins.list[str]:
        """The latest log entries, newest first: ``[YYYY-MM-DD] operation | what (pages: ...)``."""
        if not isinstance(limit, int) or limit < 1:
            raise InvalidPageError(f"limit must be a positive integer, got {limit!r}")
        return await self._run(self._recent_log, limit)

    def _recent_log(self, limit: int) -> builtins.list[str]:
        text = read_text(self.directory, LOG_FILE)
        if text is None:
            return []
        entries: builtins.list[tuple[str, builtins.list[str]]] = []
        scanned = False
        for line in text.splitlines():
            heading = _LOG_ENTRY.fullmatch(line)
            if heading is not None:
                entries.append((heading.group(1), []))
                continue
            named = _LOG_PAGES.fullmatch(line.strip())
            if named is not None and entries:
                entries[-1][1].extend(i.strip() for i in named.group(1).split(",") if i.strip())
                continue
            listed = _LOG_PAGE.match(line.strip())  # the older format: one link per page
            if listed is not None and entries:
                if not scanned:  # its links read by the folder's layout
                    self._layout.scan()
                    scanned = True
                target = listed.group(1)
                entries[-1][1].append(self._layout.target_from_disk(target, "") or target)
        lines = [what + (f" (pages: {', '.join(pages)})" if pages else "") for what, pages in entries]
        return lines[::-1][:limit]

    # -- writing ----------------------------------------------------------------------------------

    async def create(
        self, type: str, slug: str, title: str, content: str, fields: FieldChanges | None = None
    ) -> str:
        """Writes a new page file and the index, and returns the page's id.

        Raises:
            PageExistsError: the id is taken (by a retired page too: ids are never reused).
            MissingLinksError: the content links to pages that do not exist; nothing is written.
        """
        new = NewPage(type, slug, title, content, fields)
        created = await self._run(self._create_many, [new], write=True)
        return created[0]

    async def create_many(self, pages: Sequence[NewPage]) -> builtins.list[str]:
        """Creates pages that may link to each other: all of them or none, even across a kill.

        The same call made again once it was done (a retry after a crash, or after its answer was
        lost) writes nothing and answers the same ids.

        Raises:
            PageExistsError: one of the ids is taken (by anything but this very call); nothing is
                written.
            MissingLinksError: a link resolves to no existing or new page; nothing is written.
        """
        pages = list(pages)
        for page in pages:
            if not isinstance(page, NewPage):
                raise InvalidPageError(f"{page!r} is not a NewPage(type, slug, title, content, fields)")
        if not pages:
            return []
        return await self._run(self._create_many, pages, write=True)

    def _create_many(self, pages: builtins.list[NewPage]) -> builtins.list[str]:
        snapshot = self._layout.scan()
        now = now_iso(self._clock)
        batch: dict[str, KnowledgePage] = {}
        for number, new in enumerate(pages):
            page = self._new_page(new, now, number if len(pages) > 1 else None)
            if page.id in batch:
                raise InvalidPageError(f"page {page.id!r} is given twice")
            batch[page.id] = page
        taken = [page_id for page_id in batch if snapshot.exists(page_id)]
        if taken:
            if len(taken) == len(batch) and all(_same(snapshot, page) for page in batch.values()):
                # this very call was done before (a retry after a crash or a lost answer): it is done
                return list(batch)
            retired = taken[0] in snapshot.pages and snapshot.pages[taken[0]].page.status == RETIRED
            raise PageExistsError(
                f"page {taken[0]!r} already exists{' (retired)' if retired else ''}: "
                + ("choose another slug" if retired else "edit or rewrite it, or choose another slug")
            )
        missing: builtins.list[str] = []
        bad: builtins.list[str] = []
        for page in batch.values():
            found_missing, found_bad = link_problems(page.content, lambda i: snapshot.exists(i) or i in batch)
            missing += found_missing
            bad += found_bad
        raise_link_problems(missing, bad)
        paths = _paths(snapshot)
        for page_id in batch:
            paths[page_id] = self._layout.default_path(page_id) or self._layout.label_path(page_id, snapshot)
        snapshot.refuse_links(*(paths[page_id] for page_id in batch), INDEX_FILE)
        files = {paths[page.id]: self._layout.render(page, paths) for page in batch.values()}
        files.update(self._index_file({**_pages(snapshot), **batch}, paths))
        write_all(self.directory, files)
        return list(batch)

    def _new_page(self, new: NewPage, now: str, number: int | None) -> KnowledgePage:
        try:
            page_type = type_of_new_page(self._types, new.type)
            check_slug(new.slug)
            if page_type is not None and not page_type.directory and new.slug in RESERVED_ROOT_SLUGS:
                raise InvalidPageError(
                    f"slug {new.slug!r} is taken by the store's own {new.slug}.md: choose another slug"
                )
            title = check_title(new.title)
            new_title, changes = check_fields(new.fields)
            content = _content(new.content)
        except KnowledgeStoreError as error:
            if number is not None:
                raise type(error)(f"pages[{number}] ({new.type}/{new.slug}): {error.message}") from None
            raise
        fields: dict[str, FieldValue] = {"status": ACTIVE, "created": now, "updated": now}
        if new.type == "summary":
            fields["ingested"] = now
        apply_fields(fields, changes)
        page_id = make_id(new.type, new.slug)
        return KnowledgePage(
            id=page_id, type=new.type, title=new_title or title, content=content, fields=fields
        )

    async def edit(
        self, page_id: str, old_text: str, new_text: str, fields: FieldChanges | None = None
    ) -> None:
        """Replaces the one occurrence of ``old_text`` in the page's content.

        Raises:
            PageNotFoundError: no page has this id.
            PageStatusError: the page is retired, kept only as a record.
            EditMismatchError: ``old_text`` occurs zero times or more than once.
        """
        await self._run(self._edit, page_id, old_text, new_text, fields, write=True)

    def _edit(self, page_id: str, old_text: str, new_text: str, fields: FieldChanges | None) -> None:
        snapshot = self._layout.scan()
        page = self._writable(snapshot, page_id)
        content = normal_content(replace_once(page_id, page.content, old_text, new_text))
        check_links(content, snapshot.exists, before=page.content)
        self._save(snapshot, page, content, fields, ingest=False)

    async def rewrite(self, page_id: str, content: str, fields: FieldChanges | None = None) -> None:
        """Replaces the page's whole content; a summary's ``ingested`` time is set anew.

        Raises:
            PageNotFoundError: no page has this id.
            PageStatusError: the page is retired, kept only as a record.
        """
        await self._run(self._rewrite, page_id, content, fields, write=True)

    def _rewrite(self, page_id: str, content: str, fields: FieldChanges | None) -> None:
        snapshot = self._layout.scan()
        page = self._writable(snapshot, page_id)
        new_content = _content(without_notice(page, content))
        check_links(new_content, snapshot.exists, before=page.content)
        self._save(snapshot, page, new_content, fields, ingest=True)

    def _save(
        self,
        snapshot: Snapshot,
        page: KnowledgePage,
        content: str,
        changes: FieldChanges | None,
        *,
        ingest: bool,
    ) -> None:
        title, accepted = check_fields(changes)
        fields = dict(page.fields)
        apply_fields(fields, accepted)
        now = now_iso(self._clock)
        fields.setdefault("status", ACTIVE)
        fields["updated"] = now
        if ingest and page.type == "summary":
            fields["ingested"] = now
        self._write(snapshot, replace(page, title=title or page.title, content=content, fields=fields))

    async def supersede(self, page_id: str, by: str, reason: str | None = None) -> None:
        """Marks the page superseded by page ``by``: a notice on the page points readers to ``by``.

        Raises:
            PageStatusError: either page is retired, or the page is superseded already.
        """
        await self._run(self._supersede, page_id, by, reason, write=True)

    def _supersede(self, page_id: str, by: str, reason: str | None) -> None:
        snapshot = self._layout.scan()
        page = self._entry(snapshot, page_id).page
        replacement = self._entry(snapshot, by).page
        if by == page_id:
            raise InvalidPageError(f"a page cannot supersede itself: name the page that replaces {page_id!r}")
        if page.status == RETIRED:
            raise PageStatusError(f"page {page_id!r} is retired: it stays retired")
        if page.status == SUPERSEDED:
            raise PageStatusError(
                f"page {page_id!r} is already superseded by {page.fields.get('superseded_by')!r}: "
                "edit that page instead"
            )
        if replacement.status == RETIRED:
            raise PageStatusError(f"page {by!r} is retired: it cannot replace {page_id!r}")
        if reason is not None and (not isinstance(reason, str) or "\n" in reason):
            raise InvalidPageError("the reason must be one line")
        reason = (reason or "").strip() or None
        because = f" ({reason})" if reason else ""
        notice = f"> Superseded on {self._day()}{because}: see [{replacement.title}]({by})."
        self._mark(snapshot, page, SUPERSEDED, reason, by, notice)

    async def retire(self, page_id: str, reason: str) -> None:
        """Marks the page retired with ``reason``: it leaves the listings, the index and search, not the disk.

        Raises:
            PageStatusError: the page is retired already.
        """
        await self._run(self._retire, page_id, reason, write=True)

    def _retire(self, page_id: str, reason: str) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidPageError("give a reason to retire a page: it is kept on the page")
        if "\n" in reason:
            raise InvalidPageError("the reason must be one line")
        snapshot = self._layout.scan()
        page = self._entry(snapshot, page_id).page
        if page.status == RETIRED:
            raise PageStatusError(f"page {page_id!r} is already retired")
        superseded_by = page.fields.get("superseded_by")
        reason = reason.strip()
        self._mark(
            snapshot,
            page,
            RETIRED,
            reason,
            superseded_by if isinstance(superseded_by, str) else None,
            f"> Retired on {self._day()}: {reason.rstrip('.')}. Don't rely on what it says.",
        )

    def _day(self) -> str:
        return self._clock().astimezone(UTC).strftime("%Y-%m-%d")

    def _mark(
        self,
        snapshot: Snapshot,
        page: KnowledgePage,
        status: str,
        reason: str | None,
        by: str | None,
        notice: str,
    ) -> None:
        """Sets the status fields and the notice, which replaces the page's earlier one."""
        fields = dict(page.fields)
        fields["status"] = status
        for name, value in (("superseded_by", by), ("reason", reason)):
            if value is None:
                fields.pop(name, None)
            else:
                fields[name] = value
        fields["updated"] = now_iso(self._clock)
        self._write(snapshot, replace(page, fields=fields, notice_text=notice))

    async def log(self, operation: str, what: str, pages: Sequence[str] = ()) -> None:
        """Appends ``## [YYYY-MM-DD] operation | what`` to ``log.md``, and ``- pages: a, b`` when given.

        The pages are ids as given: a log records what was done, so a page that does not exist
        (any more, or yet) is no reason to refuse it.
        """
        await self._run(self._log, operation, what, list(pages), write=True)

    def _log(self, operation: str, what: str, pages: builtins.list[str]) -> None:
        operation, what = check_log_entry(operation, what)
        for page_id in pages:
            parse_id(page_id)
        text = read_text(self.directory, LOG_FILE)
        if text is None:
            text = _LOG_HEADER
        entry = [f"## [{self._day()}] {operation} | {what}"]
        if pages:
            entry.append("- pages: " + ", ".join(dict.fromkeys(pages)))
        atomic_write(self.directory, LOG_FILE, text.rstrip("\n") + "\n\n" + "\n".join(entry) + "\n")

    async def write_overview(self, content: str) -> None:
        """Replaces ``overview.md``; its links must resolve like a page's."""
        await self._run(self._write_overview, content, write=True)

    def _write_overview(self, content: str) -> None:
        if not isinstance(content, str):
            raise InvalidPageError("content must be a string")
        snapshot = self._layout.scan()
        content = normal_content(content)
        check_links(content, snapshot.exists, before=self._overview())
        atomic_write(self.directory, OVERVIEW_FILE, self._layout.to_disk(content, "", _paths(snapshot)))

    # -- helpers ----------------------------------------------------------------------------------

    def _entry(self, snapshot: Snapshot, page_id: str) -> Entry:
        parse_id(page_id)
        if page_id in snapshot.unreadable:
            raise PageFormatError(snapshot.unreadable[page_id])
        entry = snapshot.pages.get(page_id)
        if entry is None:
            path = self._layout.default_path(page_id)
            if path is not None:
                snapshot.refuse_links(path)
            raise PageNotFoundError(f"page {page_id!r} does not exist: the index lists every page by id")
        return entry

    def _writable(self, snapshot: Snapshot, page_id: str) -> KnowledgePage:
        page = self._entry(snapshot, page_id).page
        if page.status == RETIRED:
            raise PageStatusError(
                f"page {page_id!r} is retired and kept only as a record: write a new page instead"
            )
        return page

    def _write(self, snapshot: Snapshot, page: KnowledgePage) -> None:
        paths = _paths(snapshot)
        snapshot.refuse_links(paths[page.id], INDEX_FILE)
        files = {paths[page.id]: self._layout.render(page, paths)}
        files.update(self._index_file({**_pages(snapshot), page.id: page}, paths))
        write_all(self.directory, files)

    def _index_file(self, pages: dict[str, KnowledgePage], paths: dict[str, str]) -> dict[str, str]:
        """``index.md`` with its new text, or nothing when it already says that."""
        text = self._layout.to_disk(render_index(pages.values(), self._types), "", paths)
        try:
            if read_text(self.directory, INDEX_FILE) == text:
                return {}
        except UnicodeDecodeError:
            pass
        return {INDEX_FILE: text}


def _same(snapshot: Snapshot, new: KnowledgePage) -> bool:
    """Whether the folder holds ``new`` as creating it wrote it (the store's own times aside)."""
    entry = snapshot.pages.get(new.id)
    if entry is None:
        return False
    old = entry.page

    def own(fields: dict[str, FieldValue]) -> dict[str, FieldValue]:
        return {k: v for k, v in fields.items() if k not in STORE_TIMES}

    return (old.status, old.title, old.content, own(old.fields)) == (
        ACTIVE,
        new.title,
        new.content,
        own(new.fields),
    )


def _pages(snapshot: Snapshot) -> dict[str, KnowledgePage]:
    return {page_id: entry.page for page_id, entry in snapshot.pages.items()}


def _paths(snapshot: Snapshot) -> dict[str, str]:
    return {page_id: entry.path for page_id, entry in snapshot.pages.items()}


def _content(content: object) -> str:
    if not isinstance(content, str):
        raise InvalidPageError("content must be a string")
    text = normal_content(content)
    if not text:
        raise InvalidPageError(
            "the content is empty: write the page (a page is never emptied; supersede or retire it instead)"
        )
    return text
