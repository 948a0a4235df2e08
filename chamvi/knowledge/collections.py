"""Declaring knowledge collections: a name, an embedding model, sources, an optional resync."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge.embedders import Embedder
from chamvi.knowledge.sources import Source
from chamvi.names import validate_agent_name
from chamvi.provider_objects import is_embedder

MIN_RESYNC = timedelta(minutes=1)


@dataclass(frozen=True)
class KnowledgeCollection:
    """A declared knowledge collection, checked by :func:`knowledge_collection`, for ``App(collections=)``."""

    name: str
    model: str
    """The embedding model's ref (an object's own ``ref``), which names the collection's generation."""
    sources: tuple[Source, ...]
    resync: timedelta | None = None
    trusted: bool | None = None
    embedder: Embedder | None = None
    """The embedding model object given as ``model=``, which the App registers under ``model``."""

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
    model: str | Embedder,
    sources: Sequence[Source],
    resync: timedelta | None = None,
    trusted: bool | None = None,
) -> KnowledgeCollection:
    """A collection fed by ``sources`` and embedded by ``model`` (e.g. ``local/all-minilm-l6-v2``).

    ``model`` is a ref or an embedding model object, known by its own ``ref`` (keep it stable: it
    names the collection's generation, and another ref re-embeds the collection).

    ``resync`` re-reads the sources that long after the last pass (at least one minute), once per
    interval however many workers run.
    """
    try:
        validate_agent_name(name)
    except InvalidAgentDefinitionError:
        raise InvalidAgentDefinitionError(
            f"collection name {name!r} is invalid: use lowercase letters and digits in words "
            "joined by single '-', at most 64 characters"
        ) from None
    embedder: Embedder | None = None
    if is_embedder(model):
        embedder = model  # type: ignore[assignment]  # is_embedder checked its shape
        model = getattr(model, "ref", None)  # type: ignore[assignment]  # checked below
    if not isinstance(model, str) or "/" not in model:
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: model {model!r} must be a '<provider>/<model>' string, or an "
            "embedding model object whose ref is one"
        )
    if not sources:
        raise InvalidAgentDefinitionError(
            f"collection {name!r} has no sources: give it folder(...) or define_source(...)"
        )
    if resync is not None and (not isinstance(resync, timedelta) or resync < MIN_RESYNC):
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: resync must be at least one minute, got {resync!r}"
        )
    return KnowledgeCollection(
        name=name, model=model, sources=tuple(sources), resync=resync, trusted=trusted, embedder=embedder
    )
