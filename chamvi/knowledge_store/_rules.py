"""The rules every store keeps, written once over pages in memory: validation, links, check, search.

A store of your own can use these helpers too (they are what ``FileKnowledgeStore`` runs).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from chamvi.errors import EditMismatchError, InvalidPageError, MissingLinksError
from chamvi.knowledge_store._ids import is_slug, linked_ids, malformed_links, slugify
from chamvi.knowledge_store._types import (
    RETIRED,
    SUPERSEDED,
    CheckReport,
    FieldChanges,
    FieldValue,
    KnowledgePage,
    LinkRef,
    PageType,
    SearchHit,
)

STATUS_FIELDS = ("status", "superseded_by", "reason")
"""Fields only ``supersede`` and ``retire`` set."""
STORE_TIMES = ("created", "updated", "ingested")
"""Fields the store sets itself; a caller's value is ignored (a summary's ``ingested`` above all)."""

_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_NON_ALNUM = re.compile(r"[\W_]+")
_LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_SNIPPET_CHARS = 160
_GIST_CHARS = 120


def now_iso(clock: Callable[[], datetime]) -> str:
    return clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def type_of_new_page(types: Sequence[PageType], name: str) -> PageType | None:
    """The declared type a new page names, or None for a type nobody declared.

    A type is a label (the seed: a store should be able to keep any type), so an undeclared one is
    taken as long as it is a slug; it only lacks a description and a template.

    Raises:
        InvalidPageError: ``name`` is no slug.
    """
    for page_type in types:
        if page_type.name == name:
            return page_type
    if not isinstance(name, str) or not is_slug(name):
        known = ", ".join(repr(t.name) for t in types)
        raise InvalidPageError(
            f"page type {name!r} is invalid: use lowercase letters and digits joined by single hyphens, "
            f"e.g. one of {known}"
        )
    return None


def check_slug(slug: str) -> None:
    if not is_slug(slug):
        suggestion = slugify(slug) if isinstance(slug, str) else ""
        raise InvalidPageError(
            f"slug {slug!r} is invalid: use lowercase letters and digits joined by single hyphens"
            + (f", e.g. {suggestion!r}" if suggestion else "")
        )


def check_title(title: object) -> str:
    if not isinstance(title, str) or not title.strip():
        raise InvalidPageError("the title is empty: give the page a short title")
    if "\n" in title or "\r" in title:
        raise InvalidPageError("the title must be one line")
    return title.strip()


def check_fields(changes: FieldChanges | None) -> tuple[str | None, dict[str, FieldValue | None]]:
    """Validates field changes; answers a new title (the ``title`` field) and the other changes.

    The store's own times are dropped; the status fields are refused.
    """
    if changes is None:
        return None, {}
    if not isinstance(changes, Mapping):
        raise InvalidPageError("fields must be an object of field names to strings (null removes one)")
    title: str | None = None
    accepted: dict[str, FieldValue | None] = {}
    for name, value in changes.items():
        if not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
            raise InvalidPageError(
                f"field name {name!r} is invalid: use lowercase letters, digits and '_', "
                "starting with a letter"
            )
        if name in STATUS_FIELDS:
            raise InvalidPageError(
                f"field {name!r} is set by supersede and retire only: use them to change a page's status"
            )
        if name in STORE_TIMES:
            continue
        if name == "type":
            raise InvalidPageError(
                "field 'type' is the page's type, kept by the store: create a page of the other type instead"
            )
        if name == "title":
            title = check_title(value)
            continue
        if value is not None and not _is_value(value):
            raise InvalidPageError(
                f"field {name!r} must be a string, a list of strings, or null to remove it"
            )
        if isinstance(value, str | list) and any("\n" in v or "\r" in v for v in _strings(value)):
            raise InvalidPageError(f"field {name!r} must be one line")
        accepted[name] = list(value) if isinstance(value, list) else value
    return title, accepted


def _is_value(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _strings(value: FieldValue) -> list[str]:
    return [value] if isinstance(value, str) else value


def apply_fields(fields: dict[str, FieldValue], changes: Mapping[str, FieldValue | None]) -> None:
    for name, value in changes.items():
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = value


def link_problems(
    content: str, exists: Callable[[str], bool], before: str = ""
) -> tuple[list[str], list[str]]:
    """The missing page ids and the malformed page links that ``content`` adds to ``before``.

    Links the page already had are left to ``check()``: a hand-written page with a broken link can
    still be edited elsewhere.
    """
    if not isinstance(content, str):
        raise InvalidPageError("content must be a string")
    known_bad = set(malformed_links(before))
    bad = [t for t in malformed_links(content) if t not in known_bad]
    had = set(linked_ids(before))
    missing = [i for i in linked_ids(content) if i not in had and not exists(i)]
    return missing, bad


def raise_link_problems(missing: Sequence[str], bad: Sequence[str]) -> None:
    """Raises one :class:`MissingLinksError` naming every missing id and malformed link, if any."""
    missing = list(dict.fromkeys(missing))
    bad = list(dict.fromkeys(bad))
    problems: list[str] = []
    if missing:
        problems.append(
            "links to pages that do not exist: " + ", ".join(repr(i) for i in missing) + ". Create those "
            "pages first (create_many creates pages that link to each other) or remove the links"
        )
    if bad:
        problems.append(
            "not page ids: " + ", ".join(repr(t) for t in bad) + ". Link pages as [text](type/slug), "
            "with type and slug in lowercase letters and digits joined by single hyphens"
        )
    if problems:
        raise MissingLinksError("; ".join(problems) + ". Nothing was written.", missing)


def check_links(content: str, exists: Callable[[str], bool], before: str = "") -> None:
    """Refuses links to missing pages, and malformed page links, that ``content`` adds to ``before``."""
    raise_link_problems(*link_problems(content, exists, before))


def replace_once(page_id: str, content: str, old_text: str, new_text: str) -> str:
    if not isinstance(old_text, str) or not old_text:
        raise InvalidPageError("old_text is empty: copy the exact text to replace from the page")
    if not isinstance(new_text, str):
        raise InvalidPageError("new_text must be a string")
    count = content.count(old_text)
    if count == 0:
        raise EditMismatchError(
            f"old_text was not found in {page_id!r}: read the page again and copy the text exactly, "
            "whitespace included"
        )
    if count > 1:
        raise EditMismatchError(
            f"old_text occurs {count} times in {page_id!r}: include more of the surrounding text so it "
            "matches exactly once"
        )
    return content.replace(old_text, new_text, 1)


def check_report(
    pages: Mapping[str, KnowledgePage],
    types: Sequence[PageType],
    overview: str = "",
    unreadable: Collection[str] = (),
) -> CheckReport:
    """Broken links, orphans and links to retired pages among ``pages`` (every page, retired too).

    ``unreadable``: ids of pages that exist but cannot be read; links to them are not broken.
    """
    standalone = {t.name for t in types if t.standalone}
    report = CheckReport()
    linked: set[str] = set()
    sources = [(p.id, p.content) for p in pages.values() if p.status != RETIRED]
    sources.append(("overview", overview))
    for source, content in sources:
        for target in linked_ids(content):
            page = pages.get(target)
            if page is None:
                if target not in unreadable:
                    report.broken_links.append(LinkRef(source, target))
                continue
            if page.status == RETIRED:
                report.retired_links.append(LinkRef(source, target))
            if source != target and source != "overview":
                linked.add(target)
    for page in pages.values():
        if page.status in (RETIRED, SUPERSEDED) or page.type in standalone:
            continue
        if page.id not in linked:
            report.orphans.append(page.id)
    report.orphans.sort()
    return report


def linked_from(pages: Iterable[KnowledgePage], page_id: str) -> tuple[str, ...]:
    return tuple(
        sorted(p.id for p in pages if p.id != page_id and p.status != RETIRED and page_id in p.links)
    )


TITLE_SCORE = 5
ALIAS_SCORE = 4
LINE_SCORE = 1
"""What a query term found in a page's title, its ``aliases`` field, or one line of its body adds."""


def fold(text: str) -> str:
    """Text as search compares it: accents stripped (NFD, marks dropped) and lowercase."""
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def search_terms(query: str) -> list[str]:
    """The query's terms: folded, split on anything not a letter or a digit, one letter ones dropped."""
    return list(dict.fromkeys(t for t in _NON_ALNUM.split(fold(query)) if len(t) > 1))


def keyword_search(pages: Iterable[KnowledgePage], query: str, limit: int) -> list[SearchHit]:
    """Live pages holding the query's terms, best first: agent-kit's keyword search.

    Each term found in the title scores 5, in the ``aliases`` field 4, and 1 for each body line
    holding it (links count by their text), all compared folded (:func:`fold`) and as substrings,
    so ``refund`` finds "Refunds" and ``nautico`` finds "Náutico".
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidPageError("the query is empty: say what to look for")
    if not isinstance(limit, int) or limit < 1:
        raise InvalidPageError(f"limit must be a positive integer, got {limit!r}")
    terms = search_terms(query)
    if not terms:
        return []
    ranked: list[tuple[int, str, KnowledgePage, str]] = []
    for page in pages:
        if page.status == RETIRED:
            continue
        title = fold(page.title)
        aliases = page.fields.get("aliases", "")
        alias_text = fold(", ".join(aliases) if isinstance(aliases, list) else aliases)
        lines = [line.strip() for line in _plain(page.content).splitlines() if line.strip()]
        folded = [fold(line) for line in lines]
        score = 0
        first_line: int | None = None
        for term in terms:
            score += TITLE_SCORE * (term in title) + ALIAS_SCORE * (term in alias_text)
            for number, line in enumerate(folded):
                if term in line:
                    score += LINE_SCORE
                    first_line = number if first_line is None else min(first_line, number)
        if score:
            shown = lines[first_line] if first_line is not None else gist(page.content)
            ranked.append((-score, page.id, page, shown))
    ranked.sort(key=lambda r: r[:2])
    return [
        SearchHit(
            id=page.id,
            type=page.type,
            title=page.title,
            score=float(-negative),
            snippet=_cut(shown, _SNIPPET_CHARS),
            status=page.status,
        )
        for negative, _, page, shown in ranked[:limit]
    ]


def _cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1].rstrip() + "…"


def _plain(content: str) -> str:
    """Content with links reduced to their text, so ``concept/refunds`` does not match 'concept'."""
    return _LINK_TEXT.sub(r"\1", content)


def gist(content: str) -> str:
    """The first line of prose of a page, links reduced to their text, cut to 120 characters."""
    for line in content.splitlines():
        text = line.strip()
        if not text or text.startswith(("#", ">", "```", "~~~", "---", "|")):
            continue
        text = _LINK_TEXT.sub(r"\1", text.lstrip("-*+ ").strip())
        if text:
            return text if len(text) <= _GIST_CHARS else text[: _GIST_CHARS - 1].rstrip() + "…"
    return ""


def render_index(pages: Iterable[KnowledgePage], types: Sequence[PageType]) -> str:
    """The catalogue of live pages, grouped by type in the types' order, linked by id."""
    by_type: dict[str, list[KnowledgePage]] = {}
    for page in sorted(pages, key=lambda p: p.id):
        if page.status != RETIRED:
            by_type.setdefault(page.type, []).append(page)
    lines = ["# Index", ""]
    if not by_type:
        lines += ["No pages yet.", ""]
    order = [t.name for t in types] + sorted(set(by_type) - {t.name for t in types})
    for name in order:
        group = by_type.get(name)
        if not group:
            continue
        lines += [f"## {name}", ""]
        for page in group:
            line = f"- [{page.title}]({page.id})"
            by = page.fields.get("superseded_by")
            if page.status == SUPERSEDED and isinstance(by, str):
                line += f" (superseded by [{by}]({by}))"
            summary = gist(page.content)
            if summary:
                line += f": {summary}"
            lines.append(line)
        lines.append("")
    return "\n".join(lines)


def check_log_entry(operation: str, what: str) -> tuple[str, str]:
    if not isinstance(operation, str) or not operation.strip():
        raise InvalidPageError("the operation is empty: name what was done in a word, e.g. 'ingest', 'query'")
    if not isinstance(what, str) or not what.strip():
        raise InvalidPageError("what is empty: say in one line what was done")
    for name, value in (("operation", operation), ("what", what)):
        if "\n" in value or "\r" in value:
            raise InvalidPageError(f"{name} must be one line")
    if "|" in operation:
        raise InvalidPageError("operation must not contain '|'")
    return operation.strip(), what.strip()
