"""Embedding models for knowledge collections: ``<provider>/<model>`` refs resolved through one registry.

* ``openai/<model>``: the OpenAI embeddings API, or any compatible server (``OPENAI_BASE_URL``).
* ``local/all-minilm-l6-v2``: the offline default, shipped with chamvi; never reaches a model hub.
* ``fastembed/<model name>``: a model fastembed downloads from Hugging Face on first use.
* ``test/hash-<dims>``: a deterministic hashing embedder for tests; it knows no language.

Every embedder answers unit vectors, so cosine similarity is a dot product.
"""

from chamvi.knowledge.embedders._base import (
    Embedder,
    normalise,
)
from chamvi.knowledge.embedders._registry import (
    EmbedderFactory,
    EmbeddingRegistry,
    default_embedding_registry,
)
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.knowledge.embedders.local import (
    LOCAL_MODELS,
    FastEmbedEmbedder,
    FastEmbedProvider,
    LocalModel,
    LocalProvider,
)
from chamvi.knowledge.embedders.openai import OpenAIEmbedder, OpenAIEmbeddingProvider

DEFAULT_EMBEDDING_MODEL = "local/all-minilm-l6-v2"
"""The model a collection uses offline when none is configured."""

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "LOCAL_MODELS",
    "Embedder",
    "EmbedderFactory",
    "EmbeddingRegistry",
    "FastEmbedEmbedder",
    "FastEmbedProvider",
    "HashEmbedder",
    "LocalModel",
    "LocalProvider",
    "OpenAIEmbedder",
    "OpenAIEmbeddingProvider",
    "default_embedding_registry",
    "normalise",
]
