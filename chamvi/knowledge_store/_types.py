"""What a knowledge store holds and answers: page types, pages, search hits, the check report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chamvi.errors import InvalidPageError
from chamvi.knowledge_store._ids import is_slug, linked_ids, parse_id

FieldValue = str | list[str]
FieldChanges = Mapping[str, FieldValue | None]
"""Front-matter fields to set; a None value removes the field."""

ACTIVE = "active"
SUPERSEDED = "superseded"
RETIRED = "retired"
STATUSES = (ACTIVE, SUPERSEDED, RETIRED)


@dataclass(frozen=True)
class PageType:
    """A kind of page: the model reads ``description`` to choose one and starts from ``template``.

    Attributes:
        name: the type in ids (``concept`` in ``concept/refunds``): a slug.
        description: when to use it, for the model.
        template: the page body a new page starts from.
        folder: where a file store keeps these pages: ``""`` for the root folder itself (at most one
            type may live there; in agent-kit's layout its files carry ``type:`` in their front
            matter), a name for that folder, or None for the default: a built-in type's plural
            folder in agent-kit's layout (``concepts/``), its own name in the older singular layout
            (``concept/``), and its own name for any other type.
        standalone: pages of this type need no page linking to them: ``check()`` never reports
            them as orphans (summaries, syntheses and preferences are).
    """

    name: str
    description: str
    template: str = ""
    folder: str | None = None
    standalone: bool = False

    @property
    def directory(self) -> str:
        """The folder in the older singular layout (see :meth:`folder_in`)."""
        return self.folder_in(plural=False)

    def folder_in(self, *, plural: bool) -> str:
        """The folder of these pages in agent-kit's plural layout (``plural``) or the singular one."""
        if self.folder is not None:
            return self.folder
        return PLURAL_FOLDERS.get(self.name, self.name) if plural else self.name


PLURAL_FOLDERS: dict[str, str] = {
    "summary": "summaries",
    "concept": "concepts",
    "entity": "entities",
    "synthesis": "syntheses",
    "preference": "preferences",
}
"""The built-in types' folders in agent-kit's layout, the one new stores use."""


BUILT_IN_PAGE_TYPES: tuple[PageType, ...] = (
    PageType(
        name="summary",
        description=(
            "One source (a document, an article, a conversation) in the wiki's words: what it says and "
            "where it came from. Set the field 'file' to the source's path; the store records when it "
            "was ingested. Nothing needs to link to a summary."
        ),
        template=(
            "What the source is: title, author, date, and why it matters here.\n\n"
            "## Key points\n\n- One claim or fact per line, in your own words.\n\n"
            "## Connections\n\nLink each concept and entity this source touches (only pages that exist) "
            "and say what the source adds to it.\n"
        ),
        standalone=True,
    ),
    PageType(
        name="concept",
        description=(
            "An idea, a rule, a process or a term: what it is, how it works, how it relates to other "
            "concepts. Other pages link to it."
        ),
        template=(
            "What it is, in one plain paragraph.\n\n"
            "## Details\n\nHow it works, its conditions and its exceptions.\n\n"
            "## Related\n\nLinks to related concepts and entities, each with a word on how they relate.\n\n"
            "## Sources\n\nLinks to the summaries this page is built from.\n"
        ),
    ),
    PageType(
        name="entity",
        description=(
            "A specific thing with a name: a person, an organisation, a product, a place, a system. "
            "Other pages link to it."
        ),
        template=(
            "Who or what it is, in one paragraph.\n\n"
            "## Facts\n\n- One fact per line, each from a source.\n\n"
            "## Related\n\nLinks to the concepts and entities it is involved with.\n\n"
            "## Sources\n\nLinks to the summaries that mention it.\n"
        ),
    ),
    PageType(
        name="synthesis",
        description=(
            "An answer or an analysis drawn from several pages: a comparison, a decision, a timeline, "
            "the answer to a question worth keeping. Nothing needs to link to it."
        ),
        template=(
            "The question or the purpose of this page.\n\n"
            "## Answer\n\nThe conclusion first, then the reasoning, linking every page it draws on.\n\n"
            "## Open questions\n\nWhat is still unknown or contradictory.\n"
        ),
        standalone=True,
    ),
    PageType(
        name="preference",
        description=(
            "How the people you work for like things done: a style, a habit, a decision to follow next "
            "time. Nothing needs to link to it."
        ),
        template=(
            "The preference, in one sentence.\n\n"
            "## Why\n\nWhere it came from (a conversation, a correction) and when it applies.\n\n"
            "## Examples\n\n- A short example of following it.\n"
        ),
        standalone=True,
    ),
)
"""The kit's types: ``summary``, ``concept``, ``entity``, ``synthesis`` and ``preference``."""


def resolve_page_types(declared: Sequence[PageType] = ()) -> tuple[PageType, ...]:
    """The built-in types with ``declared`` on top: a declared type with a built-in's name replaces it.

    Raises:
        InvalidPageError: a bad name or folder, a name declared twice, two types in one folder.
    """
    if isinstance(declared, PageType):
        declared = [declared]
    by_name = {t.name: t for t in BUILT_IN_PAGE_TYPES}
    seen: set[str] = set()
    for page_type in declared:
        if not isinstance(page_type, PageType):
            raise InvalidPageError(
                f"{page_type!r} is not a PageType(name=..., description=..., template=...)"
            )
        if not is_slug(page_type.name):
            raise InvalidPageError(
                f"page type name {page_type.name!r} is invalid: use lowercase letters and digits joined by "
                "single hyphens"
            )
        if page_type.name in seen:
            raise InvalidPageError(f"page type {page_type.name!r} is declared twice")
        if page_type.folder not in (None, "") and not is_slug(page_type.folder):
            raise InvalidPageError(
                f"page type {page_type.name!r}: folder {page_type.folder!r} must be a slug, or '' for the "
                "root folder"
            )
        seen.add(page_type.name)
        by_name[page_type.name] = page_type
    for plural in (True, False):  # a folder is either layout's, so neither may put two types in one
        folders: dict[str, str] = {}
        for page_type in by_name.values():
            directory = page_type.folder_in(plural=plural)
            other = folders.setdefault(directory, page_type.name)
            if other != page_type.name:
                where = repr(directory) if directory else "the root folder"
                raise InvalidPageError(
                    f"page types {other!r} and {page_type.name!r} both keep their pages in {where}: give "
                    "one of them another folder="
                )
    return tuple(by_name.values())


def notice_for(status: str, fields: Mapping[str, FieldValue]) -> str | None:
    """The notice a superseded or retired page shows at its top; None for a live page."""
    reason = fields.get("reason")
    because = f": {reason}" if isinstance(reason, str) and reason else ""
    if status == SUPERSEDED:
        by = fields.get("superseded_by")
        if isinstance(by, str) and by:
            return f"> **Superseded** by [{by}]({by}){because}"
        return f"> **Superseded**{because}"
    if status == RETIRED:
        return f"> **Retired**{because}"
    return None


def status_of(fields: Mapping[str, FieldValue]) -> str:
    status = fields.get("status")
    return status if isinstance(status, str) and status in STATUSES else ACTIVE


@dataclass(frozen=True)
class PageInfo:
    """A page in a listing."""

    id: str
    type: str
    title: str
    status: str = ACTIVE
    updated: str | None = None


@dataclass(frozen=True)
class KnowledgePage:
    """One page as read: links in ``content`` are ids, ``linked_from`` the live pages linking here.

    ``fields`` is the page's front matter but its title (``status``, ``superseded_by``, ``reason``,
    ``created``, ``updated``, a summary's ``file`` and ``ingested``, and any field of your own).
    """

    id: str
    type: str
    title: str
    content: str
    fields: dict[str, FieldValue] = field(default_factory=dict)
    linked_from: tuple[str, ...] = ()
    notice_text: str | None = None
    """The notice as written on the page (``supersede`` and ``retire`` date it); None for none."""

    @property
    def slug(self) -> str:
        return parse_id(self.id)[1]

    @property
    def status(self) -> str:
        return status_of(self.fields)

    @property
    def links(self) -> list[str]:
        """The page ids the content links to."""
        return linked_ids(self.content)

    @property
    def notice(self) -> str | None:
        """The line shown at the top of a superseded or retired page: as written, else made up."""
        if self.status == ACTIVE:
            return None
        return self.notice_text or notice_for(self.status, self.fields)

    def info(self) -> PageInfo:
        updated = self.fields.get("updated")
        return PageInfo(
            id=self.id,
            type=self.type,
            title=self.title,
            status=self.status,
            updated=updated if isinstance(updated, str) else None,
        )


@dataclass(frozen=True)
class NewPage:
    """One page for ``create_many``."""

    type: str
    slug: str
    title: str
    content: str
    fields: FieldChanges | None = None

    @property
    def id(self) -> str:
        return f"{self.type}/{self.slug}"


@dataclass(frozen=True)
class SearchHit:
    """A page found by ``search``: higher ``score`` ranks first (compare scores within one answer)."""

    id: str
    type: str
    title: str
    score: float
    snippet: str
    status: str = ACTIVE


@dataclass(frozen=True)
class LinkRef:
    """A link from page ``source`` (or ``overview``) to ``target``."""

    source: str
    target: str


@dataclass(frozen=True)
class CheckReport:
    """What ``check()`` found.

    Attributes:
        broken_links: links to pages that do not exist.
        orphans: live pages no other live page links to (standalone types excepted).
        retired_links: links from live pages to retired pages.
        problems: files the store could not read as pages (file stores only).
    """

    broken_links: list[LinkRef] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    retired_links: list[LinkRef] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No broken link (orphans and links to retired pages are advice)."""
        return not self.broken_links

    @property
    def clean(self) -> bool:
        return not (self.broken_links or self.orphans or self.retired_links or self.problems)


def with_notice(page: KnowledgePage) -> str:
    """The content as ``read`` answers it: a superseded or retired page's notice on top, as on disk.

    agent-kit's own store reads a page's body back whole, notice included, so a model reading a
    replaced page sees where to go before anything the page says.
    """
    notice = page.notice
    if notice is None:
        return page.content
    return f"{notice}\n\n{page.content}" if page.content else f"{notice}\n"


def without_notice(page: KnowledgePage, content: str) -> str:
    """``content`` without the page's notice on top (a rewrite of what ``read`` answered).

    The store writes the notice itself, above the heading.
    """
    notice = page.notice
    if notice is not None and content.startswith(notice):
        return content[len(notice) :].lstrip("\n")
    return content
