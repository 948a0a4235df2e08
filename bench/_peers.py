"""Section 5's peers: LangChain's ``index()`` and LlamaIndex's ``IngestionPipeline`` on the same folder.

Each peer makes the same three passes as ``Indexer.run_pass`` in ``_knowledge_disk.py`` (a first
index, a no-op re-sync, a re-sync after 1 % of the files were edited, 1 % deleted and 1 % added), with
the same digest embedder, in the same run, so a ratio against them compares one machine's times.
Their vectors go to qdrant-client's local mode on disk (``path=``), the embedded Qdrant either of
them offers. LangChain keeps its records in ``InMemoryRecordManager`` (its SQL one is not in
``langchain-core``), LlamaIndex in a ``SimpleDocumentStore``: both in memory, which spares them the
writes chamvi's registry makes to disk.

The peers install with the ``bench`` extra (``pip install -e '.[bench]'``); without them
:func:`available` says why and section 5 prints no peer column. Run the benchmark from the
repository's root as ``python bench/knowledge.py``: ``llama-index-workflows`` installs a top-level
``workflows`` package, which the repository's own ``workflows/`` folder hides when the root is on
``sys.path`` (``python -c`` from the root), and LlamaIndex then fails to import.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEERS = ("LangChain index()", "LlamaIndex pipeline")
DIMENSIONS = 32
CHUNK_CHARS = 1000  # about chamvi's passages (chunk(): ~800-1200 characters)


def _digest(text: str) -> list[float]:
    """The vector ``_knowledge_disk.DigestEmbedder`` makes for ``text``."""
    return [b / 255 + 0.01 for b in hashlib.blake2b(text.encode(), digest_size=32).digest()]


def available() -> str | None:
    """None when both peers import, else why not (for the line section 5 prints instead)."""
    try:
        import langchain_core.indexing  # noqa: F401
        import langchain_qdrant  # noqa: F401
        import langchain_text_splitters  # noqa: F401
        import llama_index.core.ingestion
        import llama_index.vector_stores.qdrant  # noqa: F401
    except ImportError as error:
        return f"{error.name or error} is not installed (pip install -e '.[bench]')"
    return None


@dataclass
class PeerRun:
    peer: str
    first: float
    noop: float
    changed: float


def _files(root: Path) -> list[tuple[str, str]]:
    return [(str(p.relative_to(root)), p.read_text()) for p in sorted(root.rglob("*.md"))]


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _three_passes(
    peer: str, one_pass: Callable[[], Any], change: Callable[[], object], client: Any
) -> PeerRun:
    """A first index, a no-op, then one after ``change``, as ``_knowledge_disk.measure`` makes them."""
    first = _timed(one_pass)
    noop = _timed(one_pass)
    change()
    changed = _timed(one_pass)
    client.close()
    return PeerRun(peer, first, noop, changed)


def _local_mode(folder: Path) -> Any:
    from qdrant_client import QdrantClient

    warnings.filterwarnings("ignore", message="Local mode is not recommended", category=UserWarning)
    return QdrantClient(path=str(folder))


def langchain_passes(root: Path, work: Path, change: Callable[[], object]) -> PeerRun:
    """LangChain's ``index()`` with ``cleanup="full"``: a first index, a no-op, then after ``change``."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_qdrant import QdrantVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from qdrant_client import models

    class Digest(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [_digest(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return _digest(text)

    client = _local_mode(work / "langchain-qdrant")
    client.create_collection(
        "peer", vectors_config=models.VectorParams(size=DIMENSIONS, distance=models.Distance.COSINE)
    )
    store = QdrantVectorStore(client=client, collection_name="peer", embedding=Digest())
    records = InMemoryRecordManager("peer")
    records.create_schema()
    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARS, chunk_overlap=0)

    def one_pass() -> None:
        documents = [Document(page_content=text, metadata={"source": rel}) for rel, text in _files(root)]
        index(
            splitter.split_documents(documents),
            records,
            store,
            cleanup="full",
            source_id_key="source",
            batch_size=64,
        )

    return _three_passes(PEERS[0], one_pass, change, client)


def llamaindex_passes(root: Path, work: Path, change: Callable[[], object]) -> PeerRun:
    """LlamaIndex's ``IngestionPipeline`` with a docstore and ``UPSERTS_AND_DELETE``, the same passes."""
    from llama_index.core import Document
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    class Digest(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return _digest(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return _digest(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return _digest(text)

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [_digest(t) for t in texts]

    client = _local_mode(work / "llamaindex-qdrant")
    pipeline = IngestionPipeline(
        # whitespace words for its token counts: its default tokenizer (tiktoken) downloads its tables
        transformations=[
            SentenceSplitter(chunk_size=CHUNK_CHARS // 5, chunk_overlap=0, tokenizer=str.split),
            Digest(embed_batch_size=64),
        ],
        docstore=SimpleDocumentStore(),
        vector_store=QdrantVectorStore(client=client, collection_name="peer"),
        docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
    )

    def one_pass() -> None:
        pipeline.run(documents=[Document(text=text, id_=rel) for rel, text in _files(root)])

    return _three_passes(PEERS[1], one_pass, change, client)
