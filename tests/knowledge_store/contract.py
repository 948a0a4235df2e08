"""The rules every KnowledgeStore keeps, written once and run against every store.

``knowledge_store_contract(factory)`` returns the contract's tests; a test module adopts them::

    globals().update(knowledge_store_contract(file_store))

``factory(tmp_path, page_types)`` is an async context manager yielding a fresh, empty store that
holds the built-in types plus ``page_types``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chamvi.knowledge_store import (
    BUILT_IN_PAGE_TYPES,
    EditMismatchError,
    InvalidPageError,
    KnowledgeStore,
    LinkRef,
    LogReader,
    MissingLinksError,
    NewPage,
    PageExistsError,
    PageNotFoundError,
    PageStatusError,
    PageType,
)

StoreFactory = Callable[[Path, Sequence[PageType]], AbstractAsyncContextManager[KnowledgeStore]]
ContractTest = Callable[[Path], Awaitable[None]]

FAQ = PageType(name="faq", description="A question customers ask, with its answer.", template="Q:\n\nA:\n")


async def seed(store: KnowledgeStore) -> None:
    """Three linked pages: a concept, an entity that links it, a summary linking both."""
    await store.create("concept", "refunds", "Refunds", "Refunds are paid within 14 days of the return.")
    await store.create("entity", "acme", "Acme", "A shop. Its [refund rules](concept/refunds) apply.")
    await store.create(
        "summary",
        "policy-2024",
        "Policy 2024",
        "The 2024 policy: [Refunds](concept/refunds) and [Acme](entity/acme).",
        {"file": "sources/policy-2024.pdf"},
    )


def knowledge_store_contract(make_store: StoreFactory) -> dict[str, ContractTest]:
    """The contract's tests, named ``test_...``, for one kind of store."""

    async def test_ids_are_type_slug_and_read_and_index_return_links_as_ids(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            page = await store.read("entity/acme")
            assert page is not None
            assert (page.id, page.type, page.slug, page.title) == ("entity/acme", "entity", "acme", "Acme")
            assert page.content.strip() == "A shop. Its [refund rules](concept/refunds) apply."
            assert page.links == ["concept/refunds"]
            refunds = await store.read("concept/refunds")
            assert refunds is not None and refunds.linked_from == ("entity/acme", "summary/policy-2024")
            index = await store.index()
            for page_id in ("concept/refunds", "entity/acme", "summary/policy-2024"):
                assert f"({page_id})" in index
            assert ".md" not in index
            assert [p.id for p in await store.list()] == [
                "concept/refunds",
                "entity/acme",
                "summary/policy-2024",
            ]
            assert await store.read("concept/nothing") is None

    async def test_a_link_to_a_missing_page_is_refused_naming_every_missing_id(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            with pytest.raises(MissingLinksError) as refused:
                await store.create(
                    "concept",
                    "refunds",
                    "Refunds",
                    "See [returns](concept/returns) and [Acme](entity/acme#x).",
                )
            assert "'concept/returns'" in refused.value.message and "'entity/acme'" in refused.value.message
            assert refused.value.missing == ("concept/returns", "entity/acme")
            assert await store.read("concept/refunds") is None
            assert await store.list() == []

    async def test_create_many_links_pages_among_themselves_all_or_none(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            with pytest.raises(MissingLinksError, match="'entity/nobody'"):
                await store.create_many(
                    [
                        NewPage("concept", "returns", "Returns", "Linked from [refunds](concept/refunds)."),
                        NewPage("concept", "refunds", "Refunds", "See [returns](concept/returns)."),
                        NewPage("entity", "acme", "Acme", "Run by [nobody](entity/nobody)."),
                    ]
                )
            assert await store.list() == []
            ids = await store.create_many(
                [
                    NewPage("concept", "returns", "Returns", "Linked from [refunds](concept/refunds)."),
                    NewPage("concept", "refunds", "Refunds", "See [returns](concept/returns)."),
                ]
            )
            assert ids == ["concept/returns", "concept/refunds"]
            returns = await store.read("concept/returns")
            assert returns is not None and returns.linked_from == ("concept/refunds",)
            with pytest.raises(PageExistsError):
                await store.create_many(
                    [NewPage("entity", "acme", "Acme", "x"), NewPage("concept", "returns", "R", "y")]
                )
            assert await store.read("entity/acme") is None

    async def test_edit_rewrite_and_write_overview_refuse_missing_links_and_write_nothing(
        tmp_path: Path,
    ) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            before = await store.read("concept/refunds")
            with pytest.raises(MissingLinksError, match="'concept/returns'"):
                await store.edit("concept/refunds", "14 days", "14 days ([returns](concept/returns))")
            with pytest.raises(MissingLinksError, match="'concept/returns', 'entity/bob'"):
                await store.rewrite("concept/refunds", "[r](concept/returns) [b](entity/bob)")
            with pytest.raises(MissingLinksError, match="'concept/returns'"):
                await store.write_overview("Start at [returns](concept/returns).")
            assert await store.read("concept/refunds") == before
            assert (await store.overview()).strip() == ""
            await store.write_overview("Start at [Refunds](concept/refunds).")
            assert (await store.overview()).strip() == "Start at [Refunds](concept/refunds)."

    async def test_a_link_that_is_no_page_id_is_refused(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            with pytest.raises(MissingLinksError, match="'Concept/Refunds'"):
                await store.create("concept", "a", "A", "See [it](Concept/Refunds).")
            await store.create(
                "concept", "b", "B", "See [the site](https://example.com/a/b) and ![x](img/x.png)."
            )

    async def test_edit_replaces_exactly_one_occurrence_or_says_why_not(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await store.create("concept", "days", "Days", "Pay in 14 days. Ship in 14 days.")
            with pytest.raises(EditMismatchError, match="occurs 2 times in 'concept/days'"):
                await store.edit("concept/days", "14 days", "10 days")
            with pytest.raises(EditMismatchError, match="not found in 'concept/days'"):
                await store.edit("concept/days", "30 days", "10 days")
            with pytest.raises(InvalidPageError, match="old_text is empty"):
                await store.edit("concept/days", "", "x")
            await store.edit("concept/days", "Pay in 14 days", "Pay in 10 days", {"owner": "finance"})
            page = await store.read("concept/days")
            assert page is not None
            assert page.content.strip() == "Pay in 10 days. Ship in 14 days."
            assert page.fields["owner"] == "finance"
            await store.edit("concept/days", "Ship", "We ship", {"owner": None, "title": "Delays"})
            page = await store.read("concept/days")
            assert page is not None and "owner" not in page.fields and page.title == "Delays"
            with pytest.raises(PageNotFoundError, match="'concept/nope'"):
                await store.edit("concept/nope", "a", "b")

    async def test_supersede_marks_the_page_with_its_replacement_reason_and_a_notice(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            await store.create("concept", "refunds-2025", "Refunds (2025)", "Paid within 10 days.")
            with pytest.raises(PageNotFoundError, match="'concept/nope'"):
                await store.supersede("concept/refunds", "concept/nope")
            await store.supersede("concept/refunds", "concept/refunds-2025", "the 2025 policy shortened it")
            page = await store.read("concept/refunds")
            assert page is not None and page.status == "superseded"
            assert page.fields["superseded_by"] == "concept/refunds-2025"
            assert page.fields["reason"] == "the 2025 policy shortened it"
            assert page.notice is not None and page.notice.startswith("> Superseded on ")
            assert page.notice.endswith(
                " (the 2025 policy shortened it): see [Refunds (2025)](concept/refunds-2025)."
            )
            assert "concept/refunds" in [p.id for p in await store.list()]
            with pytest.raises(PageStatusError, match="already superseded"):
                await store.supersede("concept/refunds", "concept/refunds-2025")

    async def test_a_retired_page_leaves_list_index_and_search_but_read_returns_it(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            await store.create("concept", "warranty", "Warranty", "Every gadget has a two year warranty.")
            assert "concept/warranty" in [h.id for h in await store.search("gadget warranty")]
            with pytest.raises(InvalidPageError, match="reason"):
                await store.retire("concept/warranty", " ")
            await store.retire("concept/warranty", "we stopped selling gadgets")
            assert "concept/warranty" not in [p.id for p in await store.list()]
            assert "concept/warranty" not in await store.index()
            assert "concept/warranty" not in [h.id for h in await store.search("gadget warranty")]
            page = await store.read("concept/warranty")
            assert page is not None and page.status == "retired"
            assert page.fields["reason"] == "we stopped selling gadgets"
            assert page.notice is not None and page.notice.startswith("> Retired on ")
            assert page.notice.endswith(": we stopped selling gadgets. Don't rely on what it says.")
            with pytest.raises(PageStatusError, match="already retired"):
                await store.retire("concept/warranty", "again")
            with pytest.raises(PageStatusError, match="retired"):
                await store.edit("concept/warranty", "two", "three")

    async def test_pages_are_never_deleted_so_a_taken_id_stays_taken(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            with pytest.raises(PageExistsError, match="'concept/refunds' already exists"):
                await store.create("concept", "refunds", "Again", "Again.")
            await store.retire("entity/acme", "closed")
            with pytest.raises(PageExistsError, match="retired"):
                await store.create("entity", "acme", "Acme again", "Reopened.")

    async def test_check_reports_orphans_and_links_to_retired_pages(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            await store.create("concept", "lonely", "Lonely", "Nobody links here.")
            await store.create("synthesis", "answer", "Answer", "Drawn from [Acme](entity/acme).")
            await store.create("preference", "tone", "Tone", "Short answers.")
            report = await store.check()
            assert report.ok and report.broken_links == [] and report.retired_links == []
            # a summary, a synthesis and a preference need no page linking them; the summary's links count
            assert report.orphans == ["concept/lonely"]
            await store.retire("entity/acme", "closed")
            report = await store.check()
            assert sorted(report.retired_links, key=lambda r: r.source) == [
                LinkRef("summary/policy-2024", "entity/acme"),
                LinkRef("synthesis/answer", "entity/acme"),
            ]
            assert "entity/acme" not in report.orphans  # a retired page is nobody's orphan
            assert report.ok  # links to retired pages are advice, not breakage

    async def test_a_summary_ingested_time_is_set_by_the_store_and_its_file_kept(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            started = datetime.now(UTC) - timedelta(seconds=2)
            await store.create(
                "summary",
                "paper",
                "Paper",
                "A paper.",
                {"file": "sources/Paper (final).pdf", "ingested": "1999-01-01T00:00:00Z"},
            )
            page = await store.read("summary/paper")
            assert page is not None and page.fields["file"] == "sources/Paper (final).pdf"
            first = _when(page.fields["ingested"])
            assert first >= started
            await store.edit(
                "summary/paper", "A paper.", "A good paper.", {"ingested": "1999-01-01T00:00:00Z"}
            )
            page = await store.read("summary/paper")
            assert page is not None and _when(page.fields["ingested"]) == first
            await store.rewrite("summary/paper", "A rewritten summary.", {"ingested": "1999-01-01T00:00:00Z"})
            page = await store.read("summary/paper")
            assert page is not None and _when(page.fields["ingested"]) >= first
            assert page.fields["file"] == "sources/Paper (final).pdf"
            await store.create("concept", "idea", "Idea", "An idea.", {"ingested": "1999-01-01T00:00:00Z"})
            idea = await store.read("concept/idea")
            assert idea is not None and "ingested" not in idea.fields

    async def test_status_fields_belong_to_supersede_and_retire(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            with pytest.raises(InvalidPageError, match="'status' is set by supersede and retire"):
                await store.create("concept", "a", "A", "a", {"status": "retired"})
            await store.create("concept", "a", "A", "a")
            with pytest.raises(InvalidPageError, match="'superseded_by'"):
                await store.rewrite("concept/a", "b", {"superseded_by": "concept/a"})

    async def test_declared_types_join_the_built_ins_and_replace_one_of_the_same_name(tmp_path: Path) -> None:
        concept = PageType(name="concept", description="A rule of the house.", template="Rule:\n")
        async with make_store(tmp_path, (FAQ, concept)) as store:
            names = [t.name for t in store.types()]
            assert set(names) == {t.name for t in BUILT_IN_PAGE_TYPES} | {"faq"}
            assert next(t for t in store.types() if t.name == "concept").description == "A rule of the house."
            summary = next(t for t in store.types() if t.name == "summary")
            assert summary.description and summary.template
            await store.create("faq", "late-parcel", "My parcel is late", "Q: late?\n\nA: wait 5 days.")
            assert [p.type for p in await store.list()] == ["faq"]

    async def test_a_page_of_a_type_nobody_declared_is_kept_with_that_type(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await store.create("concept", "knots", "Knots", "Knots hold.")
            created = await store.create("lesson", "first", "First lesson", "Tie the [knots](concept/knots).")
            batch = await store.create_many(
                [
                    NewPage("lesson", "second", "Second lesson", "After [the first](lesson/first)."),
                    NewPage("drill", "daily", "Daily drill", "Repeat [the second](lesson/second)."),
                ]
            )
            assert (created, batch) == ("lesson/first", ["lesson/second", "drill/daily"])
            assert "lesson" not in {t.name for t in store.types()}
            listed = {p.id: p.type for p in await store.list()}
            assert listed == {
                "concept/knots": "concept",
                "drill/daily": "drill",
                "lesson/first": "lesson",
                "lesson/second": "lesson",
            }
            first = await store.read("lesson/first")
            assert first is not None and first.type == "lesson" and first.links == ["concept/knots"]
            assert first.linked_from == ("lesson/second",)
            knots = await store.read("concept/knots")
            assert knots is not None and knots.linked_from == ("lesson/first",)
            await store.edit("lesson/first", "Tie the", "Tie both")
            assert "lesson/first" in await store.index()
            with pytest.raises(InvalidPageError, match=r"page type 'Lesson Plan' is invalid"):
                await store.create("Lesson Plan", "x", "X", "x")
            with pytest.raises(PageExistsError):
                await store.create("lesson", "first", "Again", "Again.")

    async def test_bad_slugs_ids_and_titles_are_refused(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            with pytest.raises(InvalidPageError, match=r"slug 'Refund Policy' is invalid.*'refund-policy'"):
                await store.create("concept", "Refund Policy", "Refunds", "x")
            for slug in ("a--b", "-a", "a-", "", "a_b"):
                with pytest.raises(InvalidPageError):
                    await store.create("concept", slug, "T", "x")
            with pytest.raises(InvalidPageError, match="title is empty"):
                await store.create("concept", "a", " ", "x")
            with pytest.raises(InvalidPageError, match="content is empty"):
                await store.create("concept", "a", "A", "  \n")
            with pytest.raises(InvalidPageError, match="is not a page id"):
                await store.read("refunds")
            assert await store.list() == []

    async def test_the_log_records_finished_work_newest_first(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            await store.log("ingest", "Policy 2024", ["summary/policy-2024", "concept/refunds"])
            await store.log("query", "Asked about refunds")
            await store.log("lint", "checked", ["concept/nope"])  # a log is no link: never refused
            with pytest.raises(InvalidPageError):
                await store.log("", "nothing")
            if not isinstance(store, LogReader):
                return
            try:
                entries = await store.recent_log(10)
            except Exception as error:  # a wrapper over a store without a log
                assert getattr(error, "code", None) == "log_unavailable"
                return
            day = r"\[\d{4}-\d{2}-\d{2}\]"
            assert len(entries) == 3
            assert re.fullmatch(rf"{day} lint \| checked \(pages: concept/nope\)", entries[0])
            assert re.fullmatch(rf"{day} query \| Asked about refunds", entries[1])
            assert re.fullmatch(rf"{day} ingest \| Policy 2024.*", entries[2])
            assert "summary/policy-2024" in entries[2] and "concept/refunds" in entries[2]
            assert await store.recent_log(1) == entries[:1]

    async def test_search_ranks_the_page_with_the_query_words_first(tmp_path: Path) -> None:
        async with make_store(tmp_path, ()) as store:
            await seed(store)
            await store.create("concept", "warranty", "Warranty", "Every gadget has a two year warranty.")
            await store.create("concept", "shipping", "Shipping", "Parcels ship worldwide with tracking.")
            hits = await store.search("gadget warranty years", limit=2)
            assert len(hits) <= 2 and hits[0].id == "concept/warranty"
            assert (hits[0].type, hits[0].title, hits[0].status) == ("concept", "Warranty", "active")
            assert isinstance(hits[0].score, float) and hits[0].snippet
            assert (await store.search("parcels tracking"))[0].id == "concept/shipping"
            with pytest.raises(InvalidPageError, match="query is empty"):
                await store.search("  ")

    tests: dict[str, ContractTest] = {
        name: value for name, value in locals().items() if name.startswith("test_") and callable(value)
    }
    return tests


def _when(value: object) -> datetime:
    assert isinstance(value, str)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
