"""An agent's own knowledge folder: a collection named after the agent, which only that agent searches.

``define_agent(knowledge="knowledge")`` (a path, a ``folder(...)``, or a list of sources) gives the
agent a collection named ``agent-<agent name>`` (:func:`agent_collection_name`) and a
``knowledge_search`` over it, beside the collections its own ``knowledge_tools`` name. The App
declares the collection like any other (same passes, generations and resync), embedded by its
``embedding_model``, and refuses a declared collection of the same name and any other agent whose
``knowledge_search`` names it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chamvi._constants import AGENT_KNOWLEDGE_PREFIX, NAME_MAX_LENGTH
from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge.search import knowledge_tools, search_scope
from chamvi.knowledge.sources import Source, folder
from chamvi.tools import Tool

_HASHED_NAME_LENGTH = 48
"""How much of a long agent name its collection's name keeps, before 8 hex digits of its hash."""


def agent_collection_name(agent: str) -> str:
    """The collection of ``agent``'s own knowledge folder: ``agent-<name>``, deterministic.

    A name too long for the 64-character rule keeps its first 48 characters and 8 hex digits of
    the full name's SHA-256, so two long names that share a beginning still differ.
    """
    name = AGENT_KNOWLEDGE_PREFIX + agent
    if len(name) <= NAME_MAX_LENGTH:
        return name
    digest = hashlib.sha256(agent.encode()).hexdigest()[:8]
    return f"{AGENT_KNOWLEDGE_PREFIX}{agent[:_HASHED_NAME_LENGTH].rstrip('-')}-{digest}"


@dataclass(frozen=True)
class AgentKnowledge:
    """An agent's own knowledge folder as :func:`check_agent_knowledge` checked it."""

    collection: str
    """Its collection's reserved name (:func:`agent_collection_name`)."""
    sources: tuple[Source, ...]


def check_agent_knowledge(
    agent: str, knowledge: str | os.PathLike[str] | Source | Sequence[Source]
) -> AgentKnowledge:
    """``define_agent(knowledge=...)`` checked: a path becomes ``folder(path)``.

    Raises:
        InvalidAgentDefinitionError: it is neither a path, a source nor a non-empty list of sources.
    """
    if isinstance(knowledge, str | os.PathLike):
        sources: tuple[Source, ...] = (folder(knowledge),)
    elif isinstance(knowledge, Source):
        sources = (knowledge,)
    elif isinstance(knowledge, Sequence) and knowledge and all(isinstance(s, Source) for s in knowledge):
        sources = tuple(s for s in knowledge if isinstance(s, Source))
    else:
        raise InvalidAgentDefinitionError(
            f"agent {agent!r}: knowledge={knowledge!r} must be a folder's path, a source such as "
            "folder('knowledge'), or a non-empty list of sources"
        )
    return AgentKnowledge(collection=agent_collection_name(agent), sources=sources)


def with_knowledge_tool(agent: str, tools: dict[str, Tool], knowledge: AgentKnowledge) -> dict[str, Tool]:
    """``tools`` whose ``knowledge_search`` also searches the agent's own collection, first.

    An agent without ``knowledge_tools`` gets one over its collection alone; one with them keeps
    its collections, ``top_k`` and ``min_score``.

    Raises:
        InvalidAgentDefinitionError: a tool of its own is named ``knowledge_search``.
    """
    current = tools.get("knowledge_search")
    if current is None:
        made = knowledge_tools(collections=[knowledge.collection])[0]
    else:
        scope = search_scope(current)
        if scope is None:
            raise InvalidAgentDefinitionError(
                f"agent {agent!r} has a knowledge folder and a tool of its own named 'knowledge_search', "
                "the name of the tool that searches it: rename the tool"
            )
        made = knowledge_tools(
            collections=[knowledge.collection, *scope.collections],
            top_k=scope.top_k,
            min_score=scope.min_score,
        )[0]
    return {**tools, "knowledge_search": made}


def others_collections(agent: str, tools: Mapping[str, Tool], owners: Mapping[str, str]) -> list[str]:
    """The collections among those ``tools`` search that belong to another agent's knowledge folder."""
    named = [n for t in tools.values() if (s := search_scope(t)) is not None for n in s.collections]
    return [n for n in named if n in owners and owners[n] != agent]


def refuse_others(what: str, tools: Mapping[str, Tool], owners: Mapping[str, str], agent: str = "") -> None:
    """Refuses ``tools`` when one searches another agent's knowledge folder.

    Raises:
        InvalidAgentDefinitionError: naming the collection and the agent it belongs to.
    """
    taken = others_collections(agent, tools, owners)
    if taken:
        raise InvalidAgentDefinitionError(
            f"{what}: knowledge_search names collection {taken[0]!r}, the knowledge folder of agent "
            f"{owners[taken[0]]!r}, which only that agent searches: declare a shared collection with "
            "knowledge_collection(...) instead"
        )
