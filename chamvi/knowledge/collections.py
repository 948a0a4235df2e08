"""Declaring knowledge collections: a name, an embedding model, sources, an optional resync."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal, get_args

from chamvi._names import validate_agent_name
from chamvi._provider_objects import is_embedder
from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge.embedders import Embedder
from chamvi.knowledge.sources import Source

SearchMode = Literal["dense", "hybrid"]
"""How ``knowledge_search`` ranks a collection: by cosine similarity of dense vectors alone, or by
those and BM25 over the passages' words, fused (``docs/knowledge/hybrid-search.md``)."""
DEFAULT_SEARCH: SearchMode = "hybrid"
"""The mode of a collection that does not say, for every generation written from now on: chosen by
``bench/knowledge.py`` (hybrid finds the exact identifiers dense misses and loses no paraphrase).
A generation written before keeps its mode until the collection declares one or re-embeds."""
MIN_RESYNC = timedelta(minutes=1)
MAX_EMBEDDING_CONCURRENCY = 32


@dataclass(frozen=True)
class KnowledgeCollection:
    """A declared knowledge collection, checked by :func:`knowledge_collection`, for ``App(collections=)``."""

    name: str
    model: str
    """The embedding model's ref (an object's own ``ref``), which names the collection's generation."""
    sources: tuple[Source, ...]
    resync: timedelta | None = None
    trusted: bool | None = None
    embedding_concurrency: int | None = None
    """Embedding calls a pass keeps in flight at once (None: the indexer's default, 4)."""
    embedder: Embedder | None = None
    """The embedding model object given as ``model=``, which the App registers under ``model``."""
    search: SearchMode | None = None
    """How searches rank it; None: ``DEFAULT_SEARCH`` for a new generation, the current one's mode kept."""

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
    embedding_concurrency: int | None = None,
    search: SearchMode | None = None,
) -> KnowledgeCollection:
    """A collection fed by ``sources`` and embedded by ``model`` (e.g. ``local/all-minilm-l6-v2``).

    ``model`` is a ref or an embedding model object, known by its own ``ref`` (keep it stable: it
    names the collection's generation, and another ref re-embeds the collection).

    ``resync`` re-reads the sources that long after the last pass (at least one minute), once per
    interval however many workers run. ``embedding_concurrency`` is how many embedding calls (of
    64 passages each) a pass keeps in flight at once, 1 to 32 (default 4): lower it for a provider
    with a tight rate limit, or 1 for a local model that gains nothing from it.

    ``search`` is ``"hybrid"`` (dense vectors and BM25, fused) or ``"dense"``; changing it writes a
    new generation, like another model. Left out, a new collection (or a re-embed) gets
    ``DEFAULT_SEARCH`` and an indexed one keeps the mode its generation has.
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
    if embedding_concurrency is not None and (
        isinstance(embedding_concurrency, bool)
        or not isinstance(embedding_concurrency, int)
        or not 1 <= embedding_concurrency <= MAX_EMBEDDING_CONCURRENCY
    ):
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: embedding_concurrency must be a whole number from 1 to "
            f"{MAX_EMBEDDING_CONCURRENCY}, got {embedding_concurrency!r}"
        )
    if search is not None and search not in get_args(SearchMode):
        raise InvalidAgentDefinitionError(
            f"collection {name!r}: search must be 'hybrid' or 'dense', got {search!r}"
        )
    return KnowledgeCollection(
        name=name,
        model=model,
        sources=tuple(sources),
        resync=resync,
        trusted=trusted,
        embedding_concurrency=embedding_concurrency,
        embedder=embedder,
        search=search,
    )


MANAGED_BASE_PATH = "/knowledge"
_OTHER_ROUTES = ("/runs", "/schedules", "/state", "/artifacts", "/channels", "/ui", "/docs", "/openapi.json")


@dataclass(frozen=True)
class ManagedRoutes:
    """How the HTTP API serves managed collections (``App(managed=ManagedRoutes(...))``).

    The knowledge seed's ``routes: false`` and the HTTP app's ``bodyLimit``, for these routes: what
    ``chamvi api`` and ``chamvi dev`` serve unless their options (or ``CHAMVI_KNOWLEDGE_ROUTES``,
    ``CHAMVI_KNOWLEDGE_BASE_PATH``, ``CHAMVI_KNOWLEDGE_BODY_LIMIT``) say otherwise.

    Attributes:
        enabled: serve the routes; off, ``/knowledge`` answers 404 (declared collections still index
            and are searched, and ``chamvi knowledge`` still works).
        base_path: where the routes are, below the API's own base path: ``/knowledge`` (the seed's),
            or e.g. ``/kb``; ``""`` puts ``/collections`` at the API's root.
        max_body_bytes: a body over this many bytes sent to these routes answers 413 before anything
            parses it; None: the API's own body limit (1 MiB by default). A document may hold
            1 048 576 characters, which as JSON can take several times as many bytes: raise it to send
            documents near that limit (other routes keep the API's).

    Raises:
        InvalidAgentDefinitionError: a base path that is not ``""`` or ``/segment...``, that ends
            with ``/``, or that takes another route's place; a body limit below one byte.
    """

    enabled: bool = True
    base_path: str = MANAGED_BASE_PATH
    max_body_bytes: int | None = None

    def __post_init__(self) -> None:
        path = self.base_path
        if not isinstance(path, str) or (
            path and (not path.startswith("/") or path.endswith("/") or "//" in path or " " in path)
        ):
            raise InvalidAgentDefinitionError(
                f"managed routes: base_path {path!r} must be '' or start with '/' and not end with '/', "
                "e.g. '/knowledge'"
            )
        taken = next((p for p in _OTHER_ROUTES if path == p or path.startswith(p + "/")), None)
        if taken is not None:
            raise InvalidAgentDefinitionError(
                f"managed routes: base_path {path!r} is below {taken}, which the API serves itself: "
                "choose another, e.g. '/knowledge'"
            )
        if self.max_body_bytes is not None and (
            not isinstance(self.max_body_bytes, int) or self.max_body_bytes < 1
        ):
            raise InvalidAgentDefinitionError(
                "managed routes: max_body_bytes must be a positive number of bytes, "
                f"not {self.max_body_bytes!r}"
            )

    def overridden(
        self, *, enabled: bool | None = None, base_path: str | None = None, max_body_bytes: int | None = None
    ) -> ManagedRoutes:
        """A copy with what the command line or the environment set on top; None keeps a field."""
        changes = {"enabled": enabled, "base_path": base_path, "max_body_bytes": max_body_bytes}
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]
