"""Knowledge collections: what an agent searches by meaning through the ``knowledge_search`` tool.

Documents are fed by sources and indexed in the background into Qdrant.
"""

from chamvi.errors import InvalidDocumentError, KnowledgeNotReadyError
from chamvi.knowledge.agent_folders import agent_collection_name
from chamvi.knowledge.chunking import CHUNKER_VERSION, chunk
from chamvi.knowledge.collections import KnowledgeCollection, knowledge_collection
from chamvi.knowledge.documents import Document
from chamvi.knowledge.embedders import Embedder, EmbeddingRegistry, default_embedding_registry
from chamvi.knowledge.repos import git
from chamvi.knowledge.search import knowledge_tools
from chamvi.knowledge.sources import Source, SourceContext, define_source, folder
from chamvi.knowledge.web import urls
from chamvi.models.knowledge import CollectionMeta, CollectionStatus

__all__ = [
    "CHUNKER_VERSION",
    "CollectionMeta",
    "CollectionStatus",
    "Document",
    "Embedder",
    "EmbeddingRegistry",
    "InvalidDocumentError",
    "KnowledgeCollection",
    "KnowledgeNotReadyError",
    "Source",
    "SourceContext",
    "agent_collection_name",
    "chunk",
    "default_embedding_registry",
    "define_source",
    "folder",
    "git",
    "knowledge_collection",
    "knowledge_tools",
    "urls",
]
