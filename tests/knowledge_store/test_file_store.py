"""FileKnowledgeStore: the shared contract, then what is its own (the folder on disk, hand-written
folders, concurrent writers, keyword search)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chamvi.knowledge_store import (
    FileKnowledgeStore,
    InvalidPageError,
    KnowledgeStore,
    LinkRef,
    NewPage,
    PageFormatError,
    PageType,
)
from chamvi.knowledge_store._disk import atomic_write
from tests.knowledge_store.contract import knowledge_store_contract, seed


@asynccontextmanager
async def file_store(tmp_path: Path, page_types: Sequence[PageType]) -> AsyncIterator[KnowledgeStore]:
    yield FileKnowledgeStore(tmp_path / "wiki", page_types=page_types)


globals().update(knowledge_store_contract(file_store))

NOTE = PageType(name="note", description="A loose note.", folder="")


def fixed_clock() -> datetime:
    return datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_pages_are_markdown_files_with_front_matter_and_relative_links(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path, clock=fixed_clock)
    await seed(store)
    await store.write_overview("Start at [Refunds](concept/refunds).")
    assert (tmp_path / "entities" / "acme.md").read_text() == (
        "---\n"
        "type: entity\n"
        "title: Acme\n"
        "status: active\n"
        "created: 2025-03-04T05:06:07Z\n"
        "updated: 2025-03-04T05:06:07Z\n"
        "---\n"
        "\n"
        "# Acme\n"
        "\n"
        "A shop. Its [refund rules](../concepts/refunds.md) apply.\n"
    )
    summary = (tmp_path / "summaries" / "policy-2024.md").read_text()
    assert "ingested: 2025-03-04T05:06:07Z\nfile: sources/policy-2024.pdf\n" in summary
    assert "[Refunds](../concepts/refunds.md) and [Acme](../entities/acme.md)" in summary
    assert (tmp_path / "overview.md").read_text() == "Start at [Refunds](concepts/refunds.md).\n"
    index = (tmp_path / "index.md").read_text()
    assert "- [Refunds](concepts/refunds.md): Refunds are paid within 14 days of the return." in index
    assert index.index("## summary") < index.index("## concept") < index.index("## entity")
    by_id = index.replace("summaries/", "summary/").replace("concepts/", "concept/")
    assert await store.index() == by_id.replace("entities/", "entity/").replace(".md)", ")")
    assert not [p for p in tmp_path.rglob(".*")], "no temporary file is left behind"


async def test_the_log_is_one_heading_per_entry_and_the_index_follows_every_change(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path, clock=fixed_clock)
    await seed(store)
    await store.log("ingest", "Policy 2024", ["summary/policy-2024"])
    await store.log("query", "Asked about refunds")
    assert (tmp_path / "log.md").read_text() == (
        "# Log\n\n"
        "## [2025-03-04] ingest | Policy 2024\n- pages: summary/policy-2024\n\n"
        "## [2025-03-04] query | Asked about refunds\n"
    )
    await store.create("concept", "warranty", "Warranty", "Two years.")
    assert "(concepts/warranty.md)" in (tmp_path / "index.md").read_text()
    await store.create("concept", "warranty-2025", "Warranty (2025)", "Three years.")
    await store.supersede("concept/warranty", "concept/warranty-2025", "longer now")
    text = (tmp_path / "concepts" / "warranty.md").read_text()
    assert "\nsuperseded_by: warranty-2025.md\n" in text
    assert (
        "---\n\n> Superseded on 2025-03-04 (longer now): see [Warranty (2025)](warranty-2025.md).\n\n"
        "# Warranty\n" in text
    )
    page = await store.read("concept/warranty")
    assert page is not None and page.content == (  # read back as agent-kit's store reads it: notice on top
        "> Superseded on 2025-03-04 (longer now): see [Warranty (2025)](concept/warranty-2025).\n\n"
        "Two years.\n"
    )
    await store.rewrite("concept/warranty", page.content.replace("Two", "Three"))  # what read answered
    again = await store.read("concept/warranty")
    assert again is not None and again.content == page.content.replace("Two", "Three")  # one notice
    assert page.fields["superseded_by"] == "concept/warranty-2025"
    assert (
        "(superseded by [concept/warranty-2025](concepts/warranty-2025.md))"
        in (tmp_path / "index.md").read_text()
    )
    await store.retire("concept/warranty", "wrong")
    assert "concepts/warranty.md" not in (tmp_path / "index.md").read_text()
    text = (tmp_path / "concepts" / "warranty.md").read_text()
    # the new notice replaces the old one
    assert "---\n\n> Retired on 2025-03-04: wrong. Don't rely on what it says.\n\n# Warranty\n" in text
    assert "Superseded on" not in text


async def test_a_hand_written_folder_reads_as_pages(tmp_path: Path) -> None:
    write(
        tmp_path,
        "concept/refunds.md",
        "---\ntitle: Refunds\ntags: [money, policy]\nowner: 'the finance team'\n---\n\n# Refunds\n\n"
        "Paid after a [return](returns.md), see [Acme](../entity/acme.md#history),\n"
        "[the FAQ](../faq.md), the [old rule](../concept/gone.md) and [the web](https://example.com/x.md).\n",
    )
    write(tmp_path, "concept/returns.md", "# Returns\n\nItems come back within 30 days.\n")
    write(tmp_path, "entity/acme.md", "# Acme Corp\n\nA shop that [refunds](../concept/refunds.md).\n")
    write(tmp_path, "faq.md", "# Questions\n\nAsk about [refunds](concept/refunds.md).\n")
    write(tmp_path, "index.md", "# My own index\n")
    write(tmp_path, "notes.txt", "not markdown")
    store = FileKnowledgeStore(tmp_path, page_types=[NOTE])

    assert [p.id for p in await store.list()] == [
        "concept/refunds",
        "concept/returns",
        "entity/acme",
        "note/faq",
    ]
    refunds = await store.read("concept/refunds")
    assert refunds is not None
    assert refunds.title == "Refunds" and refunds.fields == {
        "tags": ["money", "policy"],
        "owner": "the finance team",
    }
    assert refunds.content == (
        "Paid after a [return](concept/returns), see [Acme](entity/acme#history),\n"
        "[the FAQ](note/faq), the [old rule](concept/gone) and [the web](https://example.com/x.md).\n"
    )
    assert refunds.linked_from == ("entity/acme", "note/faq")
    legacy = await store.read("entity/acme")
    assert legacy is not None and legacy.title == "Acme Corp" and legacy.status == "active"
    assert legacy.content == "A shop that [refunds](concept/refunds).\n"
    faq = await store.read("note/faq")
    assert faq is not None and faq.type == "note" and faq.links == ["concept/refunds"]

    report = await store.check()
    assert report.broken_links == [LinkRef("concept/refunds", "concept/gone")] and not report.ok
    assert report.problems == []

    # the legacy page gains front matter on its first write; its title and other text stay
    await store.edit("entity/acme", "A shop", "A small shop")
    text = (tmp_path / "entity" / "acme.md").read_text()
    assert text.startswith("---\ntype: entity\ntitle: Acme Corp\nstatus: active\nupdated: ")
    assert text.endswith("---\n\n# Acme Corp\n\nA small shop that [refunds](../concept/refunds.md).\n")
    # an edit elsewhere on a page with a broken link is allowed; a new broken link is not
    await store.edit("concept/refunds", "Paid after", "Refunded after")
    page = await store.read("concept/refunds")
    assert page is not None and page.fields["tags"] == ["money", "policy"]
    assert "[Acme](../entity/acme.md#history)" in (tmp_path / "concept" / "refunds.md").read_text()
    # the store rewrote the hand-written index.md as its catalogue
    assert "- [Questions](faq.md): Ask about refunds." in (tmp_path / "index.md").read_text()


async def test_without_a_root_folder_type_root_files_and_stray_folders_are_no_pages(tmp_path: Path) -> None:
    write(tmp_path, "faq.md", "# Questions\n")
    write(tmp_path, "drafts/idea.md", "# Idea\n")
    write(tmp_path, "concept/Refund Policy.md", "# Refund policy\n\nLinked from [acme](../entity/acme.md).\n")
    write(tmp_path, "entity/acme.md", "# Acme\n\nSee [the policy](../concept/Refund%20Policy.md).\n")
    store = FileKnowledgeStore(tmp_path)
    assert [p.id for p in await store.list()] == ["concept/refund-policy", "entity/acme"]
    acme = await store.read("entity/acme")
    assert acme is not None and acme.links == ["concept/refund-policy"]
    problems = (await store.check()).problems
    assert any(p.startswith("drafts/: no page type") for p in problems)
    assert any(p.startswith("faq.md: a file directly in the root folder is no page") for p in problems)
    # a page with an odd file name keeps its file; links to it are written to that file
    await store.create("concept", "returns", "Returns", "Unlike [the policy](concept/refund-policy).")
    assert "[the policy](Refund%20Policy.md)" in (tmp_path / "concept" / "returns.md").read_text()
    await store.edit("concept/refund-policy", "Linked from", "Linked, oddly, from")
    assert not (tmp_path / "concept" / "refund-policy.md").exists()


async def test_front_matter_it_cannot_read_is_reported_not_guessed(tmp_path: Path) -> None:
    write(tmp_path, "concept/nested.md", "---\ntitle: Nested\nauthor:\n  name: Ada\n---\nText.\n")
    write(tmp_path, "concept/fine.md", "# Fine\n")
    store = FileKnowledgeStore(tmp_path)
    assert [p.id for p in await store.list()] == ["concept/fine"]
    with pytest.raises(PageFormatError, match=r"concept/nested\.md: line 4: expected 'key: value'"):
        await store.read("concept/nested")
    assert (await store.check()).problems == [
        "concept/nested.md: line 4: expected 'key: value', found 'name: Ada' "
        "(this store reads plain 'key: value' front matter)"
    ]
    with pytest.raises(PageFormatError):
        await store.edit("concept/nested", "Text", "More")
    with pytest.raises(Exception, match="already exists"):
        await store.create("concept", "nested", "Nested", "Again.")
    await store.create("concept", "linker", "Linker", "Links [nested](concept/nested).")  # it exists


async def test_concurrent_writers_never_lose_an_update(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    other = FileKnowledgeStore(tmp_path)  # a second object on the same folder shares the lock
    lines = [f"- item {n}: open" for n in range(40)]
    await store.create("concept", "list", "List", "\n".join(lines))
    await asyncio.gather(
        *(
            (store if n % 2 else other).edit("concept/list", f"item {n}: open", f"item {n}: done")
            for n in range(40)
        ),
        *(store.log("tick", f"edit {n}") for n in range(10)),
    )
    page = await store.read("concept/list")
    assert page is not None
    assert page.content == "\n".join(f"- item {n}: done" for n in range(40)) + "\n"
    assert len(await store.recent_log(50)) == 10


async def test_keyword_search_finds_nothing_for_words_no_page_has(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    assert await store.search("anything") == []
    await seed(store)
    assert await store.search("zebra xylophone") == []
    hits = await store.search("refund")
    assert hits[0].id == "concept/refunds"  # the title counts most; 'refund' matches 'Refunds'
    assert "14 days" in hits[0].snippet


async def test_create_many_writes_every_file_or_none(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    with pytest.raises(Exception, match=r"pages\[1\] \(concept/b c\): slug 'b c' is invalid"):
        await store.create_many([NewPage("concept", "a", "A", "a"), NewPage("concept", "b c", "B", "b")])
    assert not (tmp_path / "concept").exists()


async def test_the_store_folder_is_created_on_the_first_write(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path / "new" / "wiki")
    assert await store.list() == [] and await store.overview() == "" and await store.recent_log() == []
    assert (await store.check()).clean
    await store.create("entity", "acme", "Acme", "A shop.")
    assert (tmp_path / "new" / "wiki" / "entities" / "acme.md").is_file()
    assert sorted(os.listdir(tmp_path / "new" / "wiki")) == ["entities", "index.md"]


def test_page_types_are_checked_when_the_store_is_built(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="both keep their pages in the root folder"):
        FileKnowledgeStore(tmp_path, page_types=[NOTE, PageType(name="memo", description="m", folder="")])
    with pytest.raises(Exception, match="page type name 'Bad Name' is invalid"):
        FileKnowledgeStore(tmp_path, page_types=[PageType(name="Bad Name", description="x")])
    with pytest.raises(Exception, match="'note' is declared twice"):
        FileKnowledgeStore(tmp_path, page_types=[NOTE, NOTE])


async def test_a_root_folder_type_cannot_take_the_store_s_own_file_names(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path, page_types=[NOTE])
    with pytest.raises(Exception, match=r"taken by the store's own index\.md"):
        await store.create("note", "index", "Index", "x")
    await store.create("note", "todo", "To do", "Things.")
    assert (tmp_path / "todo.md").is_file()


async def test_files_get_ordinary_permissions_and_keep_their_own(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    await store.create("concept", "a", "A", "Aa.")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "concepts" / "a.md").stat().st_mode & 0o777 == 0o666 & ~umask
    (tmp_path / "concepts" / "a.md").chmod(0o640)
    await store.edit("concept/a", "Aa", "Bb")
    assert (tmp_path / "concepts" / "a.md").stat().st_mode & 0o777 == 0o640


def snapshot_of(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


async def test_links_in_the_store_folder_are_refused_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.md", "# Secret\n\nTop secret.\n")
    write(outside, "plan.md", "The outside plan.\n")
    before = snapshot_of(outside)
    wiki = tmp_path / "wiki"
    write(wiki, "entity/acme.md", "# Acme\n\nA shop.\n")
    (wiki / "concept").symlink_to(outside, target_is_directory=True)
    (wiki / "entity" / "leak.md").symlink_to(outside / "secret.md")
    (wiki / "overview.md").symlink_to(outside / "plan.md")
    (wiki / "log.md").symlink_to(outside / "plan.md")
    store = FileKnowledgeStore(wiki)

    assert [p.id for p in await store.list()] == ["entity/acme"]
    assert await store.read("concept/secret") is None and await store.read("entity/leak") is None
    assert all("secret" not in hit.snippet.lower() for hit in await store.search("secret"))
    with pytest.raises(PageFormatError, match=r"overview\.md: a symbolic link"):
        await store.overview()
    with pytest.raises(PageFormatError, match=r"log\.md: a symbolic link"):
        await store.recent_log()
    assert sorted((await store.check()).problems) == [
        "concept/: a symbolic link, and the store does not follow links out of its folder: "
        "put the folder itself here",
        "entity/leak.md: a symbolic link, and the store does not follow links out of its folder: "
        "put the file itself here",
        "log.md: a symbolic link, and the store does not follow links out of its folder: "
        "put the file itself here",
        "overview.md: a symbolic link, and the store does not follow links out of its folder: "
        "put the file itself here",
    ]
    with pytest.raises(PageFormatError, match=r"concept/: a symbolic link"):
        await store.create("concept", "new", "New", "Written outside?")
    with pytest.raises(PageFormatError, match=r"concept/: a symbolic link"):
        await store.edit("concept/secret", "Top", "Not")
    with pytest.raises(PageFormatError, match=r"overview\.md: a symbolic link"):
        await store.write_overview("Start at [Acme](entity/acme).")
    with pytest.raises(PageFormatError, match=r"log\.md: a symbolic link"):
        await store.log("ingest", "Read something.")
    await store.edit("entity/acme", "A shop.", "A shop in town.")  # the real page is still writable
    assert snapshot_of(outside) == before
    assert (wiki / "concept").is_symlink() and (wiki / "overview.md").is_symlink()


async def test_a_page_or_folder_swapped_for_a_link_after_a_scan_is_not_read_through(tmp_path: Path) -> None:
    write(tmp_path, "outside/acme.md", "# Secret\n\nTop secret.\n")
    wiki = tmp_path / "wiki"
    (wiki / "concept").mkdir(parents=True)  # the singular layout, where entity/acme lives in entity/
    store = FileKnowledgeStore(wiki)
    await store.create("entity", "acme", "Acme", "A shop.")
    layout = store._layout  # reads what a scan found a moment before, as a raced read would
    (wiki / "entity" / "acme.md").unlink()
    (wiki / "entity" / "acme.md").symlink_to(tmp_path / "outside" / "acme.md")
    with pytest.raises(PageFormatError, match=r"entity/acme\.md: a symbolic link"):
        layout.read_page("entity/acme.md", "entity/acme")
    (wiki / "entity" / "acme.md").unlink()
    (wiki / "entity").rmdir()
    (wiki / "entity").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(PageFormatError, match=r"entity/: a symbolic link"):
        layout.read_page("entity/acme.md", "entity/acme")
    with pytest.raises(PageFormatError, match=r"entity/: a symbolic link"):
        atomic_write(wiki, "entity/acme.md", "Written outside?")
    assert (tmp_path / "outside" / "acme.md").read_text() == "# Secret\n\nTop secret.\n"


@pytest.mark.timeout(10)  # reading a FIFO would wait for a writer forever
async def test_an_overview_that_is_no_regular_file_is_reported_never_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "overview.md")
    store = FileKnowledgeStore(tmp_path)
    problem = "overview.md: not a regular file: put a markdown file here, or remove it"
    assert (await store.check()).problems == [problem]
    with pytest.raises(PageFormatError, match=problem):
        await store.overview()


async def test_a_page_of_an_undeclared_type_gets_a_folder_named_after_it_unless_another_type_owns_it(
    tmp_path: Path,
) -> None:
    store = FileKnowledgeStore(tmp_path, clock=fixed_clock)
    await store.create("concept", "knots", "Knots", "Knots hold.")
    await store.create("lesson", "first", "First lesson", "Tie the [knots](concept/knots).")
    written = (tmp_path / "lesson" / "first.md").read_text()
    assert written.startswith("---\ntype: lesson\ntitle: First lesson\n")
    assert "Tie the [knots](../concepts/knots.md)." in written
    # the next store over the folder, of whatever app, reads it as a lesson
    listed = [(p.id, p.type) for p in await FileKnowledgeStore(tmp_path).list()]
    assert listed == [("concept/knots", "concept"), ("lesson/first", "lesson")]
    assert (await store.check()).problems == []

    noted = FileKnowledgeStore(tmp_path, page_types=[PageType("note", "A note.", folder="notebook")])
    for taken, owner in (("concepts", "concept"), ("summaries", "summary"), ("notebook", "note")):
        with pytest.raises(InvalidPageError, match=rf"its folder {taken}/ is where '{owner}' pages live"):
            await noted.create(taken, "x", "X", "x")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["concepts", "lesson"]
