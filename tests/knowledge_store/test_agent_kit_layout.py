"""FileKnowledgeStore over a wiki written the way agent-kit writes one: plural type folders, ``type:``
in the front matter, dated notices, ``- pages:`` log lines, and pages of types this app never declared."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from chamvi.knowledge_store import (
    FileKnowledgeStore,
    InvalidPageError,
    NewPage,
    PageExistsError,
    PageType,
)

TOPIC = PageType(name="topic", description="A subject and every page on it.", folder="topics")
NOTE = PageType(name="note", description="A loose note.", folder="")

# hand-written, as agent-kit's own store leaves a knowledge folder
WIKI = {
    "index.md": "# Index\n\n## Concepts\n\n- [Bowline](concepts/bowline.md) — A loop that does not slip.\n",
    "log.md": (
        "# Log\n\n## [2026-01-05] ingest | Sailing manual\n- pages: summary/sailing-manual, concept/bowline\n"
    ),
    "overview.md": "Start with [the bowline](concepts/bowline.md).\n",
    "summaries/sailing-manual.md": (
        "---\ntype: summary\ntitle: Sailing manual\nfile: manual.pdf\n"
        "ingested: 2026-01-05T10:00:00.000Z\nupdated: 2026-01-05\n---\n\n"
        "# Sailing manual\n\n"
        "It teaches the [bowline](../concepts/bowline.md) and other knots.\n"
        "Written for the [Club Náutico](../entities/club-nautico.md).\n"
    ),
    "concepts/bowline.md": (
        "---\ntype: concept\ntitle: Bowline\naliases: king of knots, as de guía\nupdated: 2026-01-05\n---\n\n"
        "# Bowline\n\n"
        "A loop that does not slip, tied on every boat of the [club](../entities/club-nautico.md).\n"
    ),
    "concepts/old-bowline.md": (
        "---\ntype: concept\ntitle: Old bowline\nstatus: superseded\nsuperseded_by: bowline.md\n"
        "updated: 2026-01-05\n---\n\n"
        "> Superseded on 2026-01-05 (merged): see [Bowline](bowline.md).\n\n"
        "# Old bowline\n\nThe loop, as first written.\n"
    ),
    "entities/club-nautico.md": (
        "---\ntype: entity\ntitle: Club Náutico\nkind: organization\n---\n\n"
        "# Club Náutico\n\nWhere the [bowline](../concepts/bowline.md) is taught.\n"
    ),
    "topics/knots.md": (
        "---\ntype: topic\ntitle: Knots\n---\n\n"
        "# Knots\n\nEvery one of them: [Bowline](../concepts/bowline.md).\n"
    ),
    # a type this app does not declare: its pages are still pages
    "lessons/first.md": (
        "---\ntype: lesson\ntitle: First lesson\n---\n\n"
        "# First lesson\n\n"
        "Tie a [bowline](../concepts/bowline.md), then read [the topic](../topics/knots.md).\n"
    ),
    "faq.md": (
        "---\ntype: note\ntitle: Questions\n---\n\n# Questions\n\nAsk about [knots](topics/knots.md).\n"
    ),
    "todo.md": "# To do\n\nA note without a type: no page.\n",
}


def fixed_clock() -> datetime:
    return datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)


def agent_kit_wiki(root: Path) -> FileKnowledgeStore:
    for rel, text in WIKI.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return FileKnowledgeStore(root, page_types=[TOPIC, NOTE], clock=fixed_clock)


async def test_an_agent_kit_wiki_lists_and_reads_its_pages_with_links_as_ids(tmp_path: Path) -> None:
    store = agent_kit_wiki(tmp_path)
    assert [p.id for p in await store.list()] == [
        "concept/bowline",
        "concept/old-bowline",
        "entity/club-nautico",
        "lesson/first",
        "note/faq",
        "summary/sailing-manual",
        "topic/knots",
    ]
    bowline = await store.read("concept/bowline")
    assert bowline is not None and bowline.title == "Bowline" and "type" not in bowline.fields
    assert bowline.content == (
        "A loop that does not slip, tied on every boat of the [club](entity/club-nautico).\n"
    )
    assert bowline.fields["aliases"] == "king of knots, as de guía"
    assert bowline.linked_from == (  # the old page names it in its notice only
        "entity/club-nautico",
        "lesson/first",
        "summary/sailing-manual",
        "topic/knots",
    )
    old = await store.read("concept/old-bowline")
    assert old is not None and old.status == "superseded"
    assert old.content == (  # as agent-kit reads its own file back: the notice on top
        "> Superseded on 2026-01-05 (merged): see [Bowline](concept/bowline).\n\n"
        "The loop, as first written.\n"
    )
    assert old.fields["superseded_by"] == "concept/bowline"  # stored as a file path, returned as an id
    assert old.notice == "> Superseded on 2026-01-05 (merged): see [Bowline](concept/bowline)."
    lesson = await store.read("lesson/first")
    assert lesson is not None and lesson.type == "lesson"
    assert lesson.content == "Tie a [bowline](concept/bowline), then read [the topic](topic/knots).\n"
    faq = await store.read("note/faq")
    assert faq is not None and faq.links == ["topic/knots"]
    assert await store.overview() == "Start with [the bowline](concept/bowline).\n"
    assert await store.recent_log() == [
        "[2026-01-05] ingest | Sailing manual (pages: summary/sailing-manual, concept/bowline)"
    ]
    report = await store.check()
    assert report.broken_links == [] and report.retired_links == []
    assert report.problems == [
        "todo.md: a file directly in the root folder is no page unless its front matter says 'type: note'"
    ]


async def test_search_folds_accents_and_ranks_a_title_over_aliases_over_body_lines(tmp_path: Path) -> None:
    store = agent_kit_wiki(tmp_path)
    knots = [hit.id for hit in await store.search("KNOTS")]
    # a title (topic), then aliases (bowline), then a body line each (a link counts by its text)
    assert knots == ["topic/knots", "concept/bowline", "note/faq", "summary/sailing-manual"]
    nautico = await store.search("nautico")
    assert [hit.id for hit in nautico][:2] == ["entity/club-nautico", "summary/sailing-manual"]
    assert nautico[1].snippet == "Written for the Club Náutico."
    assert nautico[0].score > nautico[1].score
    assert [hit.id for hit in await store.search("guía")] == ["concept/bowline"]  # by an alias
    assert [hit.id for hit in await store.search("Guia")] == ["concept/bowline"]
    assert await store.search("a") == []  # one-letter terms are ignored
    assert [hit.id for hit in await store.search("a lesson")] == ["lesson/first"]


async def test_supersede_and_retire_write_dated_notices_at_the_top_and_a_relative_path(
    tmp_path: Path,
) -> None:
    store = agent_kit_wiki(tmp_path)
    await store.supersede("lesson/first", "topic/knots", "folded into the topic")
    text = (tmp_path / "lessons" / "first.md").read_text()
    assert text.startswith("---\ntype: lesson\ntitle: First lesson\nstatus: superseded\n")
    assert "\nsuperseded_by: ../topics/knots.md\n" in text
    assert text.split("---\n", 2)[2] == (
        "\n> Superseded on 2026-02-03 (folded into the topic): see [Knots](../topics/knots.md).\n\n"
        "# First lesson\n\n"
        "Tie a [bowline](../concepts/bowline.md), then read [the topic](../topics/knots.md).\n"
    )
    lesson = await store.read("lesson/first")
    assert lesson is not None and lesson.fields["superseded_by"] == "topic/knots"
    await store.retire("concept/old-bowline", "nobody ties it so")
    text = (tmp_path / "concepts" / "old-bowline.md").read_text()
    assert text.split("---\n", 2)[2] == (  # the new notice replaces the old one
        "\n> Retired on 2026-02-03: nobody ties it so. Don't rely on what it says.\n\n"
        "# Old bowline\n\nThe loop, as first written.\n"
    )
    assert "\nsuperseded_by: bowline.md\n" in text


async def test_the_log_appends_agent_kit_entries_and_names_pages_that_do_not_exist(tmp_path: Path) -> None:
    store = agent_kit_wiki(tmp_path)
    await store.log("lint", "dropped a page", ["concept/gone", "concept/bowline"])
    await store.log("query", "what is a bowline")
    assert (tmp_path / "log.md").read_text() == WIKI["log.md"] + (
        "\n## [2026-02-03] lint | dropped a page\n- pages: concept/gone, concept/bowline\n"
        "\n## [2026-02-03] query | what is a bowline\n"
    )
    assert (await store.recent_log(2)) == [
        "[2026-02-03] query | what is a bowline",
        "[2026-02-03] lint | dropped a page (pages: concept/gone, concept/bowline)",
    ]
    with pytest.raises(InvalidPageError, match="is not a page id"):
        await store.log("lint", "checked", ["gone"])


async def test_a_page_of_an_undeclared_type_is_written_in_place_and_more_are_created_beside_it(
    tmp_path: Path,
) -> None:
    store = agent_kit_wiki(tmp_path)
    await store.edit("lesson/first", "Tie a", "First tie a")
    text = (tmp_path / "lessons" / "first.md").read_text()
    assert text.startswith("---\ntype: lesson\ntitle: First lesson\n")
    assert "First tie a [bowline](../concepts/bowline.md)" in text
    await store.create("concept", "sheet-bend", "Sheet bend", "Joins two ropes; see [lesson](lesson/first).")
    assert "[lesson](../lessons/first.md)" in (tmp_path / "concepts" / "sheet-bend.md").read_text()

    # a type is a label: a new page of it goes beside the pages of that type already there
    await store.create("lesson", "second", "Second lesson", "After [the first](lesson/first), more knots.")
    second = (tmp_path / "lessons" / "second.md").read_text()
    assert second.startswith("---\ntype: lesson\ntitle: Second lesson\n")
    assert "After [the first](first.md), more knots." in second
    read = await store.read("lesson/second")
    assert read is not None and read.type == "lesson" and read.links == ["lesson/first"]
    with pytest.raises(InvalidPageError, match="field 'type' is the page's type"):
        await store.edit("concept/bowline", "A loop", "A loop", {"type": "lesson"})


async def test_new_folders_get_agent_kit_s_layout_and_singular_ones_keep_theirs(tmp_path: Path) -> None:
    fresh = FileKnowledgeStore(tmp_path / "fresh", page_types=[NOTE])
    await fresh.create("concept", "bowline", "Bowline", "A loop.")
    await fresh.create("note", "todo", "To do", "Learn the [bowline](concept/bowline).")
    assert (tmp_path / "fresh" / "concepts" / "bowline.md").is_file()
    assert (tmp_path / "fresh" / "todo.md").read_text().startswith("---\ntype: note\n")

    older = tmp_path / "older"
    (older / "concept").mkdir(parents=True)
    (older / "concept" / "bowline.md").write_text("# Bowline\n\nA loop.\n")
    (older / "todo.md").write_text("# To do\n\nLearn the [bowline](concept/bowline.md).\n")  # no type:
    (older / "overview.md").write_text("Start at [the bowline](concept/bowline.md).\n")
    (older / "log.md").write_text(
        "# Log\n\n## [2025-01-02] ingest | knots\n\n- [Bowline](concept/bowline.md)\n"
    )
    store = FileKnowledgeStore(older, page_types=[NOTE])
    assert await store.overview() == "Start at [the bowline](concept/bowline).\n"
    assert await FileKnowledgeStore(older).recent_log() == [
        "[2025-01-02] ingest | knots (pages: concept/bowline)"
    ]
    await store.create("entity", "club", "Club", "Teaches the [bowline](concept/bowline).")
    assert (older / "entity" / "club.md").is_file() and not (older / "entities").exists()
    todo = await store.read("note/todo")
    assert todo is not None and todo.links == ["concept/bowline"]

    # a plural folder makes the folder agent-kit's: the singular one is then no type's, and only
    # pages that say their type (as every page this store writes does) are still found there
    (older / "concepts").mkdir()
    assert [p.id for p in await store.list()] == ["entity/club"]
    assert any(p.startswith("concept/: no page type keeps") for p in (await store.check()).problems)


async def test_retrying_the_same_create_many_answers_the_pages_it_made(tmp_path: Path) -> None:
    store = agent_kit_wiki(tmp_path)
    batch = [
        NewPage("concept", "reef-knot", "Reef knot", "Ties two ends; see [clove](concept/clove-hitch)."),
        NewPage("concept", "clove-hitch", "Clove hitch", "Around a post.", {"aliases": ["two half hitches"]}),
    ]
    assert await store.create_many(batch) == ["concept/reef-knot", "concept/clove-hitch"]
    assert await store.create_many(batch) == ["concept/reef-knot", "concept/clove-hitch"]
    with pytest.raises(PageExistsError, match="'concept/reef-knot' already exists"):
        await store.create_many([NewPage("concept", "reef-knot", "Reef knot", "Something else.")])
