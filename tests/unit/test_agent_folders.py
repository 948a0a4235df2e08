"""An agent's own knowledge folder: its collection's reserved name, its tool, and who may search it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chamvi import App, define_agent, tool
from chamvi._names import is_valid_name
from chamvi.agents import Agent
from chamvi.dynamic_agents import parse_definition
from chamvi.errors import ChamviValidationError, InvalidAgentDefinitionError, InvalidAppError
from chamvi.knowledge import folder, knowledge_collection, knowledge_tools
from chamvi.knowledge.agent_folders import agent_collection_name
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.knowledge.search import search_scope

EMBEDDER = HashEmbedder(64)


def agent(name: str = "support", **options: Any) -> Agent:
    return define_agent(name=name, model="local/demo", instructions="Help.", **options)


def app(*agents: Agent, **options: Any) -> App:
    return App(agents=list(agents), embedding_model=EMBEDDER, **options)


def test_an_agents_collection_is_named_after_it_and_keeps_the_naming_rule_when_long() -> None:
    assert agent_collection_name("support") == "agent-support"
    long_a, long_b = "a" * 60 + "-one", "a" * 60 + "-two"
    assert is_valid_name(agent_collection_name(long_a)) and len(agent_collection_name(long_a)) <= 64
    assert agent_collection_name(long_a) != agent_collection_name(long_b)
    assert agent_collection_name(long_a) == agent_collection_name(long_a)


def test_a_path_becomes_a_folder_and_the_agent_gets_knowledge_search_over_it(tmp_path: Path) -> None:
    support = agent(knowledge=tmp_path)
    assert support.knowledge is not None
    assert support.knowledge.collection == "agent-support"
    [source] = support.knowledge.sources
    assert source.kind == "folder"
    scope = search_scope(support.tools["knowledge_search"])
    assert scope is not None and scope.collections == ("agent-support",)


def test_the_agents_own_knowledge_tools_keep_their_collections_and_options(tmp_path: Path) -> None:
    support = agent(
        knowledge=folder(tmp_path),
        tools=knowledge_tools(collections=["handbook"], top_k=3, min_score=0.2),
    )
    scope = search_scope(support.tools["knowledge_search"])
    assert scope is not None
    assert (scope.collections, scope.top_k, scope.min_score) == (("agent-support", "handbook"), 3, 0.2)


def test_a_tool_of_its_own_named_knowledge_search_is_refused_beside_a_folder(tmp_path: Path) -> None:
    @tool(name="knowledge_search")
    async def mine(query: str) -> str:
        """Looks it up."""
        return query

    with pytest.raises(InvalidAgentDefinitionError, match="rename the tool"):
        agent(knowledge=tmp_path, tools=[mine])


@pytest.mark.parametrize("bad", [[], 42, ["docs"]])
def test_knowledge_that_is_no_path_or_source_is_refused(bad: object) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=r"knowledge=.* must be a folder's path"):
        agent(knowledge=bad)


def test_a_factory_agent_with_a_knowledge_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="factory cannot have knowledge="):
        agent(knowledge=tmp_path, tools=lambda ctx: [])


def test_the_app_declares_the_folder_as_a_collection_embedded_by_its_embedding_model(tmp_path: Path) -> None:
    built = app(agent(knowledge=tmp_path))
    collection = built.collections["agent-support"]
    assert collection.model == EMBEDDER.ref and collection.sources[0].kind == "folder"
    assert built.collection_owners == {"agent-support": "support"}


def test_a_declared_collection_with_the_reserved_name_is_a_boot_error_naming_both(tmp_path: Path) -> None:
    declared = knowledge_collection("agent-support", model=EMBEDDER, sources=[folder(tmp_path)])
    with pytest.raises(InvalidAppError) as refused:
        app(agent(knowledge=tmp_path), collections=[declared])
    message = str(refused.value)
    assert "agent 'support'" in message and "knowledge_collection('agent-support'" in message


def test_another_agent_naming_the_folders_collection_is_refused_at_boot(tmp_path: Path) -> None:
    snoop = agent("snoop", tools=knowledge_tools(collections=["agent-support"]))
    with pytest.raises(InvalidAgentDefinitionError) as refused:
        app(agent(knowledge=tmp_path), snoop)
    message = str(refused.value)
    assert "agent 'snoop'" in message and "'agent-support'" in message and "of agent 'support'" in message


def test_runtime_tools_naming_an_agents_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="runtime_tools: knowledge_search names"):
        app(agent(knowledge=tmp_path), runtime_tools=knowledge_tools(collections=["agent-support"]))


def test_a_runtime_definition_with_a_knowledge_field_is_refused_saying_why() -> None:
    with pytest.raises(ChamviValidationError) as refused:
        parse_definition("triage", {"instructions": "Help.", "knowledge": "docs"})
    [issue] = refused.value.issues
    assert (issue.path, issue.code) == (("knowledge",), "knowledge_not_supported")
    assert "define_agent(knowledge=...)" in issue.message


def test_a_tool_factory_that_builds_a_search_of_another_agents_folder_is_refused(tmp_path: Path) -> None:
    snoop = agent("snoop", tools=lambda ctx: knowledge_tools(collections=["agent-support"]))
    built = app(agent(knowledge=tmp_path), snoop)
    with pytest.raises(InvalidAgentDefinitionError, match="'snoop': its tool factory: knowledge_search"):
        built.tools_of(snoop, {t.name: t for t in knowledge_tools(collections=["agent-support"])})
