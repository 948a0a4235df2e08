"""Resolves embedding model refs: an exact registration first, then the provider named before the slash."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from chamvi.errors import ModelNotFoundError
from chamvi.knowledge.embedders._base import Embedder
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.knowledge.embedders.local import FastEmbedProvider, LocalProvider
from chamvi.knowledge.embedders.openai import OpenAIEmbeddingProvider

EmbedderFactory = Callable[[str], Embedder]
"""Builds the embedder for the part of a ref after ``<provider>/``; must not touch the network."""


class EmbeddingRegistry:
    """Embedding models by ref, like the chat models' ``ModelRegistry``.

    Resolving builds no client, reads no key and loads no weights: a ref that resolves can still
    fail on its first ``embed`` (no key, no server, no model file), with an error saying why.
    A resolved embedder is kept, so every caller shares its client or its loaded model.

    Args:
        providers: factories by provider name (``openai`` serves ``openai/<model>``).
        embedders: embedders registered under an exact ref, tried first.
    """

    def __init__(
        self,
        providers: Mapping[str, EmbedderFactory] | None = None,
        embedders: Mapping[str, Embedder] | None = None,
    ) -> None:
        self._providers: dict[str, EmbedderFactory] = dict(providers or {})
        self._embedders: dict[str, Embedder] = dict(embedders or {})

    @property
    def providers(self) -> list[str]:
        return sorted(self._providers)

    def register_provider(self, provider: str, factory: EmbedderFactory) -> None:
        self._providers[provider] = factory

    def register(self, ref: str, embedder: Embedder) -> None:
        """Registers one embedder under an exact ref, e.g. a scripted one in a test."""
        self._embedders[ref] = embedder

    def merged(self, other: EmbeddingRegistry) -> EmbeddingRegistry:
        """A registry with both sets; ``other`` wins where both name the same provider or ref."""
        return EmbeddingRegistry(
            providers={**self._providers, **other._providers},
            embedders={**self._embedders, **other._embedders},
        )

    def resolve(self, ref: str) -> Embedder:
        """The embedder for ``ref``.

        Raises:
            ModelNotFoundError: no registration and no provider serves ``ref``, or the provider
                knows no such model (a ``local/...`` name that is not shipped).
        """
        embedder = self._embedders.get(ref)
        if embedder is not None:
            return embedder
        provider, _, model_id = ref.partition("/")
        factory = self._providers.get(provider)
        if factory is None or not model_id:
            known = ", ".join(repr(p + "/...") for p in sorted(self._providers)) or "none"
            models = ", ".join(repr(m) for m in sorted(self._embedders))
            raise ModelNotFoundError(
                f"embedding model {ref!r} does not resolve: known providers are {known}"
                + (f", models {models}" if models else "")
            )
        embedder = factory(model_id)
        self._embedders[ref] = embedder
        return embedder


def default_embedding_registry(
    *, openai_provider: OpenAIEmbeddingProvider | None = None, models_dir: str | Path | None = None
) -> EmbeddingRegistry:
    """The providers chamvi ships: ``openai/...``, ``fastembed/...``, ``local/...`` and ``test/hash-<dims>``.

    Args:
        openai_provider: the provider to serve ``openai/...`` (e.g. one sharing the worker's
            client); by default one reading ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` on first use.
        models_dir: where ``fastembed/...`` caches downloaded models and ``local/...`` assembles its
            model folder (e.g. ``<CHAMVI_DATA>/models``); by default fastembed's cache
            (``FASTEMBED_CACHE_PATH``) and a folder in the system's temporary directory.
    """
    openai_provider = openai_provider or OpenAIEmbeddingProvider()
    base = Path(models_dir) if models_dir is not None else None
    return EmbeddingRegistry(
        providers={
            "openai": openai_provider.embedder,
            "fastembed": FastEmbedProvider(cache_dir=base / "fastembed" if base else None).embedder,
            "local": LocalProvider(models_dir=base).embedder,
            "test": HashEmbedder.from_model_id,
        }
    )
