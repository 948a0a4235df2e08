"""``knowledge_store_tools``: the tools an agent reads and writes its knowledge base with.

The tools work on a :class:`~chamvi.knowledge_store.KnowledgeStore`, never on files, so they stay
the same whatever the store. Store errors reach the model as tool errors with their message; writes
are effect tools, so a retried step never writes twice.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from chamvi._constants import APPROVAL_TIMEOUT_MAX, DEFAULT_APPROVAL_TIMEOUT
from chamvi.errors import (
    InvalidAgentDefinitionError,
    InvalidPageError,
    LogUnavailableError,
    PageNotFoundError,
    PageStatusError,
)
from chamvi.knowledge_store._rules import type_of_new_page
from chamvi.knowledge_store._types import RETIRED, SUPERSEDED, FieldValue, KnowledgePage, without_notice
from chamvi.knowledge_store.protocol import KnowledgeStore
from chamvi.tools import Tool, ToolContext, approve, effect_tool, tool

OVERVIEW = "overview"
LOG = "log"
MAX_SEARCH_LIMIT = 50
LOG_ENTRIES = 20

_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,50}")

Fields = dict[str, FieldValue | None]


def _guide(prefix: str, store: KnowledgeStore) -> str:
    types = ", ".join(t.name for t in store.types())
    return (
        f"Wiki rules: pages have ids 'type/slug' (types: {types}); link them as [text](type/slug), only to "
        f"pages that exist ({prefix}_index lists them). Prefer {prefix}_edit to {prefix}_rewrite. Never "
        f"delete: supersede or retire instead. Log finished work with {prefix}_log."
    )


def format_page(page: KnowledgePage) -> str:
    """A page as the read tool (and ``chamvi kb read``) shows it: title, id, status, notice, fields."""
    lines = [f"# {page.title}", f"id: {page.id} | type: {page.type} | status: {page.status}"]
    if page.notice:
        lines += ["", page.notice]
    fields = {k: v for k, v in page.fields.items() if k != "status"}
    if fields:
        shown = "; ".join(f"{k}: {', '.join(v) if isinstance(v, list) else v}" for k, v in fields.items())
        lines.append(f"fields: {shown}")
    lines.append("linked from: " + (", ".join(page.linked_from) if page.linked_from else "no page"))
    # the notice once, under the status, whether the store's content holds it on top or not
    return "\n".join([*lines, "", without_notice(page, page.content).rstrip(), ""])


def _same(a: str, b: str) -> bool:
    return a.strip() == b.strip()


def knowledge_store_tools(
    store: KnowledgeStore,
    *,
    interactive: bool = False,
    approval_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    prefix: str = "knowledge",
) -> list[Tool]:
    """The knowledge base tools over ``store``.

    ``<prefix>_read`` (a page, ``overview`` or ``log``), ``_index``, ``_search``, ``_create`` (with no
    content it answers the type's template), ``_edit``, ``_rewrite`` (a page or the overview),
    ``_supersede``, ``_log`` and ``_check``; with ``interactive=True`` also ``_retire``, which asks a
    person first (a durable approval that denies after ``approval_timeout``). Leave ``interactive``
    off where nobody answers approvals. ``prefix`` renames the tools, e.g. for an agent that also
    has ``knowledge_search`` over collections.

    Raises:
        InvalidAgentDefinitionError: ``store`` is no KnowledgeStore, or a bad option.
    """
    if not isinstance(store, KnowledgeStore):
        raise InvalidAgentDefinitionError(
            f"knowledge_store_tools: {store!r} is not a KnowledgeStore (e.g. FileKnowledgeStore(dir))"
        )
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidAgentDefinitionError(
            f"knowledge_store_tools: prefix {prefix!r} must be 1-50 letters, digits, '_' or '-'"
        )
    if (
        not isinstance(approval_timeout, timedelta)
        or not timedelta(0) < approval_timeout <= APPROVAL_TIMEOUT_MAX
    ):
        raise InvalidAgentDefinitionError(
            "knowledge_store_tools: approval_timeout must be a positive timedelta of at most 24 days"
        )
    guide = _guide(prefix, store)
    p = prefix

    async def _page(page_id: str) -> KnowledgePage:
        page = await store.read(page_id)
        if page is None:
            raise PageNotFoundError(f"page {page_id!r} does not exist: {p}_index lists every page by id")
        return page

    # -- reading ----------------------------------------------------------------------------------

    async def read(id: str) -> str:
        if id == OVERVIEW:
            text = await store.overview()
            return text or f"The overview is empty: write it with {p}_rewrite(id='overview', content=...)."
        if id == LOG:
            reader = getattr(store, "recent_log", None)
            if reader is None:
                return "This knowledge store cannot show its log."
            try:
                entries: list[str] = await reader(LOG_ENTRIES)
            except LogUnavailableError:
                return "This knowledge store cannot show its log."
            return "\n".join(entries) if entries else "The log is empty."
        return format_page(await _page(id))

    async def index() -> str:
        return await store.index()

    async def search(query: str, limit: int = 10) -> list[dict[str, Any]]:
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidPageError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
        return [asdict(hit) for hit in await store.search(query, limit)]

    async def check() -> dict[str, Any]:
        report = await store.check()
        return {**asdict(report), "ok": report.ok}

    # -- writing ----------------------------------------------------------------------------------

    async def create(
        type: str, slug: str, title: str = "", content: str = "", fields: Fields | None = None
    ) -> str:
        if not content.strip():
            page_type = type_of_new_page(store.types(), type)
            if page_type is None:
                return (
                    f"No content given, so nothing was created. Page type {type!r} is not one of this "
                    f"knowledge base's types, so it has no template: call {p}_create again with the "
                    "content to create it as a page of that type, or choose a declared type."
                )
            return (
                f"No content given, so nothing was created. Page type {page_type.name!r}: "
                f"{page_type.description}\nStart from this template, then call {p}_create again with "
                f"the content:\n\n{page_type.template}"
            )
        page_id = await store.create(type, slug, title, content, fields)
        return f"Created {page_id}."

    async def create_applied(_key: str, args: BaseModel) -> str | None:
        content = getattr(args, "content", "")
        if not content.strip():
            return None
        page_id = f"{getattr(args, 'type', '')}/{getattr(args, 'slug', '')}"
        try:
            page = await store.read(page_id)
        except Exception:
            return None
        if (
            page is not None
            and page.title == getattr(args, "title", "").strip()
            and _same(page.content, content)
        ):
            return f"Created {page_id}."
        return None

    async def edit(id: str, old_text: str, new_text: str, fields: Fields | None = None) -> str:
        await store.edit(id, old_text, new_text, fields)
        return f"Edited {id}."

    async def edit_applied(_key: str, args: BaseModel) -> str | None:
        old, new = getattr(args, "old_text", ""), getattr(args, "new_text", "")
        page = await _maybe_read(getattr(args, "id", ""))
        if page is not None and old and new and old not in page.content and new in page.content:
            return f"Edited {page.id}."
        return None

    async def rewrite(id: str, content: str, fields: Fields | None = None) -> str:
        if id == OVERVIEW:
            if fields:
                raise InvalidPageError("the overview has no fields: leave fields out")
            await store.write_overview(content)
            return "Rewrote the overview."
        await store.rewrite(id, content, fields)
        return f"Rewrote {id}."

    async def rewrite_applied(_key: str, args: BaseModel) -> str | None:
        page_id, content = getattr(args, "id", ""), getattr(args, "content", "")
        if not content.strip():
            return None
        if page_id == OVERVIEW:
            return "Rewrote the overview." if _same(await store.overview(), content) else None
        page = await _maybe_read(page_id)
        if (
            page is not None
            and not getattr(args, "fields", None)
            and _same(without_notice(page, page.content), without_notice(page, content))
        ):
            return f"Rewrote {page_id}."
        return None

    async def supersede(id: str, by: str, reason: str | None = None) -> str:
        await store.supersede(id, by, reason)
        return f"{id} is superseded by {by}."

    async def supersede_applied(_key: str, args: BaseModel) -> str | None:
        page = await _maybe_read(getattr(args, "id", ""))
        by = getattr(args, "by", "")
        if page is not None and page.status == SUPERSEDED and page.fields.get("superseded_by") == by:
            return f"{page.id} is superseded by {by}."
        return None

    async def log(operation: str, what: str, pages: list[str] | None = None) -> str:
        await store.log(operation, what, pages or [])
        return "Logged."

    async def log_applied(_key: str, args: BaseModel) -> str | None:
        # a log line written twice is harmless, but a redone call that finds its own line says so
        recent = getattr(store, "recent_log", None)
        if recent is None:
            return None
        try:
            latest = await recent(1)
        except Exception:
            return None
        wanted = f"{getattr(args, 'operation', '').strip()} | {getattr(args, 'what', '').strip()}"
        return "Logged." if latest and wanted in latest[0] else None

    async def retire(id: str, reason: str, ctx: ToolContext) -> str:
        if not reason.strip():
            raise InvalidPageError("give a reason to retire a page: it is kept on the page")
        page = await _page(id)
        if page.status == RETIRED:
            raise PageStatusError(f"page {id!r} is already retired")
        linked = ", ".join(page.linked_from) if page.linked_from else "no page"
        decision = await approve(
            ctx,
            title=f"Retire knowledge page {id}?",
            body=f"{page.title}\nReason: {reason.strip()}\nLinked from: {linked}",
            timeout=approval_timeout,
        )
        if not decision.approved:
            return f"Not retired: {decision.reason or 'a person declined'}. The page stays as it is."
        await store.retire(id, reason)
        return f"Retired {id}."

    async def retire_applied(_key: str, args: BaseModel) -> str | None:
        page = await _maybe_read(getattr(args, "id", ""))
        return f"Retired {page.id}." if page is not None and page.status == RETIRED else None

    async def _maybe_read(page_id: str) -> KnowledgePage | None:
        try:
            return await store.read(page_id)
        except Exception:
            return None  # a bad id: the tool itself says what is wrong

    types = "\n".join(f"- {t.name}: {t.description}" for t in store.types())
    standalone = ", ".join(t.name for t in store.types() if t.standalone) or "none"
    tools = [
        tool(
            name=f"{p}_read",
            description=(
                f"Reads one page of the knowledge base by id ('concept/refunds'), or 'overview' (the "
                "overview page), or 'log' (the latest log entries, newest first). A page comes with its "
                "status, fields, the pages that link to it, and a notice when it is superseded or "
                f"retired. {guide}"
            ),
        )(read),
        tool(
            name=f"{p}_index",
            description=(
                f"The catalogue of the knowledge base: every live page by type, linked by id, with its "
                f"first line. Read it before writing, to link to pages that exist. {guide}"
            ),
        )(index),
        tool(
            name=f"{p}_search",
            description=(
                "Finds pages of the knowledge base that match a query (never retired ones), best first: "
                f"id, type, title, status, score and a snippet. Read a page for all of it. {guide}"
            ),
        )(search),
        effect_tool(
            name=f"{p}_create",
            description=(
                f"Creates a page: type, slug (the page id is type/slug), a short title, its content in "
                "markdown, and optional fields (strings; a summary's 'file' is its source's path). "
                "Call it without content first to get the type's template. Links must point to pages "
                f"that exist. {guide}\nPage types (another type is kept as a label, without a "
                f"template):\n{types}"
            ),
            already_applied=create_applied,
        )(create),
        effect_tool(
            name=f"{p}_edit",
            description=(
                "Replaces one exact piece of a page's content: old_text must occur exactly once "
                "(copy it from the page, whitespace included; add surrounding text when it occurs more "
                f"than once). Optional fields set front-matter fields (null removes one). {guide}"
            ),
            already_applied=edit_applied,
        )(edit),
        effect_tool(
            name=f"{p}_rewrite",
            description=(
                "Replaces the whole content of a page, or of the overview with id 'overview'. Use it "
                f"when most of the page changes; for a smaller change use {p}_edit. {guide}"
            ),
            already_applied=rewrite_applied,
        )(rewrite),
        effect_tool(
            name=f"{p}_supersede",
            description=(
                "Marks a page superseded by another page that replaces it (create that one first), with "
                "a reason. The old page stays readable with a notice pointing to its replacement. Use "
                f"this instead of deleting. {guide}"
            ),
            already_applied=supersede_applied,
        )(supersede),
        effect_tool(
            name=f"{p}_log",
            description=(
                "Records finished work in the knowledge base's log: an operation in a word (ingest, "
                "query, lint, ...), what was done in one line, and the ids of the pages it touched. "
                f"Log once the work is done. {guide}"
            ),
            already_applied=log_applied,
        )(log),
        tool(
            name=f"{p}_check",
            description=(
                "Checks the knowledge base: broken links (to pages that do not exist), orphan pages "
                f"(no other page links to them; pages of type {standalone} excepted) and links "
                f"to retired pages. Fix what it finds with {p}_edit. {guide}"
            ),
        )(check),
    ]
    if interactive:
        tools.append(
            effect_tool(
                name=f"{p}_retire",
                description=(
                    "Retires a page that is wrong and has no replacement, with a reason: it leaves the "
                    "index, the listings and search, but stays readable. A person is asked first; "
                    f"prefer {p}_supersede when a better page exists. {guide}"
                ),
                already_applied=retire_applied,
            )(retire)
        )
    return tools
