"""The knowledge base tools called directly (no run): what they answer and how they are described.
Real runs on Temporal are in tests/integration/test_knowledge_store_tools.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge_store import (
    FileKnowledgeStore,
    PageNotFoundError,
    PageType,
    VectorKnowledgeStore,
    knowledge_store_tools,
)
from chamvi.tools import TOOL_NAME_PATTERN, Tool
from tests.knowledge_store.contract import seed

READ_ONLY = ["knowledge_read", "knowledge_index", "knowledge_search", "knowledge_check"]
WRITES = ["knowledge_create", "knowledge_edit", "knowledge_rewrite", "knowledge_supersede", "knowledge_log"]


class NoLogStore:
    """A store without the optional ``recent_log``."""

    def __init__(self, inner: FileKnowledgeStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "recent_log":
            raise AttributeError(name)
        return getattr(self._inner, name)


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def use(tools: dict[str, Tool], name: str, **arguments: Any) -> Any:
    found = tools[name]
    return await found.invoke(found.parse_input(arguments), None)  # type: ignore[arg-type]


def test_the_kit_offers_retire_only_when_someone_can_be_asked(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    plain = knowledge_store_tools(store)
    assert [t.name for t in plain] == [
        "knowledge_read",
        "knowledge_index",
        "knowledge_search",
        *WRITES[:3],
        "knowledge_supersede",
        "knowledge_log",
        "knowledge_check",
    ]
    interactive = by_name(knowledge_store_tools(store, interactive=True))
    assert "knowledge_retire" in interactive and interactive["knowledge_retire"].context_param == "ctx"
    for name in [*WRITES, "knowledge_retire"]:
        assert interactive[name].effect is not None, name
    for name in READ_ONLY:
        assert interactive[name].effect is None, name
    assert all(TOOL_NAME_PATTERN.match(t) for t in interactive)
    renamed = knowledge_store_tools(store, prefix="wiki")
    assert [t.name for t in renamed][:2] == ["wiki_read", "wiki_index"]
    assert "wiki_edit" in renamed[0].description


def test_the_descriptions_teach_how_the_wiki_works(tmp_path: Path) -> None:
    faq = PageType(name="faq", description="A customer question and its answer.")
    tools = by_name(knowledge_store_tools(FileKnowledgeStore(tmp_path, page_types=[faq]), interactive=True))
    for found in tools.values():
        text = found.description
        assert "[text](type/slug)" in text and "only to pages that exist" in text
        assert "Prefer knowledge_edit" in text and "Never delete" in text and "knowledge_log" in text
    assert "faq: A customer question and its answer." in tools["knowledge_create"].description
    assert "A person is asked first" in tools["knowledge_retire"].description


def test_bad_options_fail_at_definition(tmp_path: Path) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="is not a KnowledgeStore"):
        knowledge_store_tools(tmp_path)  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="prefix"):
        knowledge_store_tools(FileKnowledgeStore(tmp_path), prefix="no spaces")


async def test_read_answers_a_page_the_overview_or_the_log(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    await seed(store)
    tools = by_name(knowledge_store_tools(store))
    page = await use(tools, "knowledge_read", id="concept/refunds")
    assert page.startswith("# Refunds\nid: concept/refunds | type: concept | status: active\n")
    assert "linked from: entity/acme, summary/policy-2024" in page
    assert "Refunds are paid within 14 days of the return." in page
    assert "The overview is empty" in await use(tools, "knowledge_read", id="overview")
    assert await use(tools, "knowledge_read", id="log") == "The log is empty."
    await use(tools, "knowledge_rewrite", id="overview", content="Start at [Refunds](concept/refunds).")
    assert await use(tools, "knowledge_read", id="overview") == "Start at [Refunds](concept/refunds).\n"
    await use(tools, "knowledge_log", operation="query", what="refunds")
    assert (await use(tools, "knowledge_read", id="log")).endswith("query | refunds")
    with pytest.raises(PageNotFoundError, match="'concept/nope' does not exist: knowledge_index lists"):
        await use(tools, "knowledge_read", id="concept/nope")
    await store.create("concept", "refunds-v2", "Refunds v2", "Ten days.")
    await use(tools, "knowledge_supersede", id="concept/refunds", by="concept/refunds-v2", reason="shorter")
    page = await use(tools, "knowledge_read", id="concept/refunds")
    assert re.search(
        r"status: superseded\n\n"
        r"> Superseded on \d{4}-\d\d-\d\d \(shorter\): see \[Refunds v2\]\(concept/refunds-v2\)\.\n",
        page,
    )


async def test_a_store_without_a_log_says_it_cannot_show_one(tmp_path: Path) -> None:
    files = FileKnowledgeStore(tmp_path)
    for store in (NoLogStore(files), VectorKnowledgeStore(NoLogStore(files), collection="wiki")):
        tools = by_name(knowledge_store_tools(store))
        assert await use(tools, "knowledge_read", id="log") == "This knowledge store cannot show its log."


async def test_create_without_content_answers_the_template_and_writes_nothing(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    tools = by_name(knowledge_store_tools(store))
    answer = await use(tools, "knowledge_create", type="summary", slug="paper", title="Paper")
    assert "Page type 'summary'" in answer and "## Key points" in answer
    assert await store.list() == []
    undeclared = await use(tools, "knowledge_create", type="topic", slug="x")
    assert "Page type 'topic' is not one of this knowledge base's types, so it has no template" in undeclared
    assert await store.list() == []
    with pytest.raises(Exception, match="page type 'Topic!' is invalid"):
        await use(tools, "knowledge_create", type="Topic!", slug="x")
    assert (
        await use(tools, "knowledge_create", type="concept", slug="a", title="A", content="Aa.")
        == "Created concept/a."
    )


async def test_what_a_write_already_did_is_recognised_so_a_retry_does_not_fail(tmp_path: Path) -> None:
    store = FileKnowledgeStore(tmp_path)
    await store.create("concept", "a", "A", "Old text.")
    await store.create("concept", "b", "B", "Bee.")
    tools = by_name(knowledge_store_tools(store, interactive=True))

    async def applied(name: str, **arguments: Any) -> Any:
        found = tools[name]
        assert found.effect is not None and found.effect.already_applied is not None
        return await found.effect.already_applied("key", found.parse_input(arguments))

    assert await applied("knowledge_create", type="concept", slug="a", title="A", content="Old text.") == (
        "Created concept/a."
    )
    assert await applied("knowledge_create", type="concept", slug="a", title="A", content="Other.") is None
    assert await applied("knowledge_edit", id="concept/a", old_text="Old", new_text="New") is None
    await store.edit("concept/a", "Old", "New")
    assert (
        await applied("knowledge_edit", id="concept/a", old_text="Old", new_text="New") == "Edited concept/a."
    )
    assert await applied("knowledge_rewrite", id="concept/a", content="New text.") == "Rewrote concept/a."
    assert await applied("knowledge_supersede", id="concept/a", by="concept/b") is None
    await store.supersede("concept/a", "concept/b")
    assert await applied("knowledge_supersede", id="concept/a", by="concept/b") == (
        "concept/a is superseded by concept/b."
    )
    assert await applied("knowledge_retire", id="concept/a", reason="x") is None
    await store.retire("concept/a", "wrong")
    assert await applied("knowledge_retire", id="concept/a", reason="x") == "Retired concept/a."
