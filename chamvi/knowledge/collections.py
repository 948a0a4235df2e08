"""Declaring knowledge collections: a name, an embedding model, sources, an optional resync."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from chamvi.agents import validate_agent_name
from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge.sources import Source

MIN_RESYNC = timedelta(minutes=1)
MAX_EMBEDDING_CONCURRENCY = 32


@dataclass(frozen=True)
class KnowledgeCollection:
    """A declared knowledge collection, checked by :func:`knowledge_collection`, for ``App(collections=)``."""

    name: str
    model: str
    sources: tuple[Source, ...]
    resync: timedelta | None = None
    trusted: bool | None = None
    embedding_concurrency: int | None = None
    """Embedding calls a pass keeps in flight at once (None: the indexer's default, 4)."""

    def source_trusted(self, source: Source) -> bool:
        """The collection's ``trusted`` overrides its sources'; sources are trusted by default."""
        if self.trusted is not None:
            return self.trusted
        return source.trusted is not False

    @property
    def is_trusted(self) -> bool:
        """Whether every source is trusted; else a search of the collection taints the run."""
        return all(self.source_trusted(s) for s in self.sources)


def knowledge_collection(
    name: str,
    *,
    model: str,
    sources: Sequence[Source],
    resync: timedelta | None = None,
    trusted: bool | None = None,
    embedding_concurrency: int | None = None,
) -> KnowledgeCollection:
    """A collection fed by ``sources`` and embedded by ``model`` (e.g. ``local/all-minilm-l6-v2``).

    ``resync`` re-reads the sources that long after the last pass (at least one minute), once per
    interval however many workers run. ``embedding_concurrency`` is how many embedding calls (of
    64 passages each) a pass keeps in flight at once, 1 to 32 (default 4): lower it for a provider
    with a tight rate limit, or 1 for a local model that gains nothing from it.
    """
    try:
        validate_agent_name(name)
    except InvalidAgentDefinitionError:
        raise InvalidAgentDefinitionError(
            f"collection name {name!r} is invalid: use lowercase letters and digits in words "
            "joined by single '-', at most 64 characters"
        ) from None
    if not isinstance(model, str) or "/" not in model:
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: model {model!r} must be a '<provider>/<model>' string"
        )
    if not sources:
        raise InvalidAgentDefinitionError(
            f"collection {name!r} has no sources: give it folder(...) or define_source(...)"
        )
    if resync is not None and (not isinstance(resync, timedelta) or resync < MIN_RESYNC):
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: resync must be at least one minute, got {resync!r}"
        )
    if embedding_concurrency is not None and (
        isinstance(embedding_concurrency, bool)
        or not isinstance(embedding_concurrency, int)
        or not 1 <= embedding_concurrency <= MAX_EMBEDDING_CONCURRENCY
    ):
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: embedding_concurrency must be a whole number from 1 to "
            f"{MAX_EMBEDDING_CONCURRENCY}, got {embedding_concurrency!r}"
        )
    return KnowledgeCollection(
        name=name,
        model=model,
        sources=tuple(sources),
        resync=resync,
        trusted=trusted,
        embedding_concurrency=embedding_concurrency,
    )
