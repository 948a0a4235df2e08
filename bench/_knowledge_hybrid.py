"""Section 6 of ``knowledge.py``: hybrid search against dense and BM25 alone, on a known-item set.

No Temporal: ``Indexer.run_pass`` writes one hybrid collection (a dense vector and a BM25 vector per
passage, in one generation) on Qdrant Edge in a temporary folder, embedded by the local model chamvi
ships (``local/all-minilm-l6-v2``). Over that one collection, each query is ranked three ways: the
dense vectors alone (``VectorStore.search``), BM25 alone (``sparse_search``) and both fused
(``hybrid_search``, what ``knowledge_search`` does on a hybrid collection: ``chamvi.vectors._fusion``).
A query's known item is the one passage written to answer it; recall@5 is the share of queries whose
item is in the first five.

The corpus (generated, seeded): incident notes, each naming one identifier (an error code, a SKU, a
command-line flag or a function name) in sentences that are otherwise alike, and policy facts, each
a subject (``contractors``) with a rule (``may claim a monthly allowance for home internet``), every
subject with every rule. Exact-identifier queries are an identifier alone or in a short question;
paraphrase queries say a fact's subject and rule in other words (``freelancers`` / ``reimbursement
for broadband at home``), so they share few words with their passage.

Latency: the same queries on the same collection, the dense query vectors computed beforehand, so
the ratio is the store's alone (the BM25 query vector is computed inside the hybrid timing); then
the whole ``KnowledgeSearch.search`` (each query embedded by the model) on the hybrid collection and
on a dense-only twin holding the same vectors.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from _common import ratio, table

from chamvi.knowledge import Document, Source, default_embedding_registry, define_source, knowledge_collection
from chamvi.knowledge.collections import SearchMode
from chamvi.knowledge.embedders import Embedder, EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.knowledge.sparse import query_vector, search_vector
from chamvi.vectors import RRF_K
from chamvi.vectors._fusion import DECISIVE
from chamvi.vectors.edge import EdgeStore

LOCAL = "local/all-minilm-l6-v2"
TOP_K = 5

_SERVICES = ("billing", "exports", "search", "login", "uploads", "reports", "webhooks", "invoices", "sync")
_SITUATIONS = (
    "during the nightly run",
    "after a deploy",
    "when the queue was full",
    "while a customer uploaded a large file",
    "under peak load",
    "right after a restart",
)
_REMEDIES = (
    "retry once the queue drains",
    "roll back the last release",
    "raise the worker's memory limit",
    "clear the cache and run it again",
    "ask the on-call engineer",
)
_VERBS = ("parse", "load", "build", "render", "send", "fetch", "merge", "split", "check", "sync")
_NOUNS = ("invoice", "order", "report", "batch", "token", "ledger", "payload", "record", "label", "quote")
_FLAG_WORDS = ("max", "retry", "backoff", "timeout", "batch", "size", "dry", "run", "limit", "cache")

SUBJECTS = (
    ("Employees", "staff members"),
    ("Contractors", "freelancers"),
    ("Managers", "team leads"),
    ("Interns", "trainees"),
    ("Customers", "clients"),
    ("Suppliers", "vendors"),
    ("Students", "learners"),
    ("Visitors", "guests"),
    ("Drivers", "couriers"),
    ("Nurses", "care workers"),
)
RULES = (
    ("may claim a monthly allowance for home internet", "reimbursement for broadband at home"),
    ("must renew their parking permit every January", "yearly renewal of the car park pass"),
    ("can borrow a laptop from the IT desk for two weeks", "loan of a notebook computer from tech support"),
    ("receive twenty-five days of paid holiday a year", "how much annual leave is granted"),
    ("have to complete fire safety training", "mandatory evacuation drill course"),
    ("are entitled to free flu vaccinations", "no-cost influenza shots"),
    ("should report a lost badge to security within a day", "misplaced ID card what to do"),
    ("may bring a dog to the office on Fridays", "are pets allowed at work"),
    ("get a fifteen percent discount in the canteen", "cheaper lunch in the cafeteria"),
    ("must encrypt every USB drive they use", "protecting data on memory sticks"),
    ("can work from another country for one month", "remote work abroad for a few weeks"),
    ("need approval before buying software", "sign-off required to purchase an app"),
)


@dataclass(frozen=True)
class Query:
    text: str
    item: str
    kind: str  # "identifier" or "paraphrase"


def _identifier(rng: random.Random, n: int) -> str:
    kind = n % 4
    if kind == 0:
        return f"E{rng.randint(10, 99)}{n:04d}"
    if kind == 1:
        return f"SKU-{n:05d}-{rng.choice('ABCDEFGH')}{rng.randint(0, 9)}"
    if kind == 2:
        first, second = rng.sample(_FLAG_WORDS, 2)
        return f"--{first}-{second}-{n}"
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}_v{n}"


def known_items(passages: int, seed: int = 7) -> tuple[list[Document], list[Query]]:
    """The corpus and its queries: every fact, and incident notes up to ``passages`` documents."""
    rng = random.Random(seed)
    documents: list[Document] = []
    queries: list[Query] = []
    for s, (subject, subject_said_otherwise) in enumerate(SUBJECTS):
        for r, (rule, rule_said_otherwise) in enumerate(RULES):
            item = f"fact-{s}-{r}"
            documents.append(Document(item, f"{subject} {rule}. This rule is part of the staff handbook."))
            queries.append(Query(f"{rule_said_otherwise} for {subject_said_otherwise}", item, "paraphrase"))
    incidents = passages - len(documents)
    for n in range(incidents):
        identifier = _identifier(rng, n)
        text = (
            f"Incident note: the {rng.choice(_SERVICES)} service failed with {identifier} "
            f"{rng.choice(_SITUATIONS)}; {rng.choice(_REMEDIES)}."
        )
        documents.append(Document(f"incident-{n}", text))
        if n % (incidents // 150) == 0:
            question = identifier if n % 2 else f"what does {identifier} mean?"
            queries.append(Query(question, f"incident-{n}", "identifier"))
    return documents, queries


def _listed(documents: Sequence[Document]) -> Source:
    async def read() -> AsyncIterator[Document]:
        for document in documents:
            yield document

    return define_source(documents=read)


class _Remembering:
    """The local model, remembering each text's vector: the dense twin costs no second embedding."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.ref = LOCAL
        self.known: dict[str, list[float]] = {}

    @property
    def dimensions(self) -> int:
        return 384

    async def embed(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.known]
        if missing:
            for text, vector in zip(missing, await self.inner.embed(missing), strict=True):
                self.known[text] = vector
        return [self.known[t] for t in texts]


def _p50_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


async def bench_hybrid(passages: int, repeats: int) -> None:
    documents, queries = known_items(passages)
    kinds = ("identifier", "paraphrase")
    counts = {k: sum(q.kind == k for q in queries) for k in kinds}
    print(
        f"\n6. Hybrid search: {len(documents)} passages ({LOCAL}, Qdrant Edge, {TOP_K} results, "
        f"RRF k={RRF_K} of the dense ranking and BM25's head when it leads by {DECISIVE}x); "
        f"{counts['identifier']} exact-identifier and {counts['paraphrase']} paraphrase queries"
    )
    model = default_embedding_registry().resolve(LOCAL)
    embedder = _Remembering(model)
    registry = EmbeddingRegistry()
    registry.register(LOCAL, embedder)
    folder = tempfile.mkdtemp(prefix="chamvi-bench-hybrid-")
    store = KnowledgeIndex(EdgeStore(folder, temporary=True))
    try:
        indexer = Indexer(store, registry, concurrency=1)
        started = time.perf_counter()
        modes: tuple[SearchMode, ...] = ("hybrid", "dense")
        for name, search in zip(modes, modes, strict=True):
            declared = knowledge_collection(name, model=LOCAL, sources=[_listed(documents)], search=search)
            await indexer.run_pass(declared)
        print(f"   indexed both in {time.perf_counter() - started:.1f} s (the model ran once per passage)")
        meta = await store.meta("hybrid")
        assert meta is not None and meta.generation is not None and meta.sparse is not None
        collection = store.generation_collection("hybrid", meta.generation)
        vectors = store.vectors
        dense_vectors = await embedder.embed([q.text for q in queries])

        found: dict[str, dict[str, int]] = {
            mode: dict.fromkeys(kinds, 0) for mode in ("dense", "sparse", "hybrid")
        }
        timings: dict[str, list[float]] = {"dense": [], "sparse": [], "hybrid": []}
        for _ in range(repeats):
            for query, vector in zip(queries, dense_vectors, strict=True):
                start = time.perf_counter()
                dense = await vectors.search(collection, vector, limit=TOP_K, payload=["document"])
                timings["dense"].append(time.perf_counter() - start)
                start = time.perf_counter()
                sparse = await vectors.sparse_search(
                    collection, query_vector(query.text), limit=TOP_K, payload=["document"]
                )
                timings["sparse"].append(time.perf_counter() - start)
                start = time.perf_counter()
                terms = search_vector(query.text)  # as knowledge_search makes it: identifier-like terms
                hybrid = (
                    await vectors.hybrid_search(collection, vector, terms, limit=TOP_K, payload=["document"])
                    if terms.indices
                    else await vectors.search(collection, vector, limit=TOP_K, payload=["document"])
                )
                timings["hybrid"].append(time.perf_counter() - start)
                if _ == 0:
                    for mode, hits in (("dense", dense), ("sparse", sparse), ("hybrid", hybrid)):
                        found[mode][query.kind] += query.item in [h.payload["document"] for h in hits]
        rows = [
            [mode, *(f"{found[mode][k] / counts[k]:.1%} ({found[mode][k]}/{counts[k]})" for k in kinds)]
            for mode in ("dense", "sparse", "hybrid")
        ]
        print(table(["recall@5", "exact identifiers", "paraphrases"], rows))

        unremembered = EmbeddingRegistry()
        unremembered.register(LOCAL, model)  # each query embedded, as knowledge_search does
        searcher = KnowledgeSearch(store, unremembered)
        end_to_end: dict[str, list[float]] = {"dense": [], "hybrid": []}
        for _ in range(repeats):
            for query in queries:
                for name in ("dense", "hybrid"):
                    start = time.perf_counter()
                    await searcher.search([name], query.text, top_k=TOP_K)
                    end_to_end[name].append(time.perf_counter() - start)
        dense_p50, hybrid_p50 = _p50_ms(timings["dense"]), _p50_ms(timings["hybrid"])
        sparse_p50 = _p50_ms(timings["sparse"])
        whole_dense, whole_hybrid = _p50_ms(end_to_end["dense"]), _p50_ms(end_to_end["hybrid"])
        print(
            table(
                ["search p50", "ms", "vs dense"],
                [
                    ["dense, same collection (store call)", dense_p50, "1.00x"],
                    [
                        "BM25 alone, same collection",
                        sparse_p50,
                        ratio(sparse_p50, dense_p50),
                    ],
                    [
                        "hybrid, same collection (BM25 query vector + one batch)",
                        hybrid_p50,
                        ratio(hybrid_p50, dense_p50),
                    ],
                    ["KnowledgeSearch.search, dense twin", whole_dense, "1.00x"],
                    [
                        "KnowledgeSearch.search, hybrid collection",
                        whole_hybrid,
                        ratio(whole_hybrid, whole_dense),
                    ],
                ],
            )
        )
        identifier_recall = found["hybrid"]["identifier"] / counts["identifier"]
        lost = found["dense"]["paraphrase"] - found["hybrid"]["paraphrase"]
        print(
            f"   gates: hybrid finds {identifier_recall:.1%} of exact identifiers (>= 95%): "
            f"{'met' if identifier_recall >= 0.95 else 'NOT met'}; "
            f"paraphrases lost against dense: {max(lost, 0)} "
            f"({'met' if lost <= 0 else 'NOT met'}); hybrid p50 / dense p50 {ratio(hybrid_p50, dense_p50)} "
            f"(<= 1.5x): {'met' if hybrid_p50 <= 1.5 * dense_p50 else 'NOT met'}"
        )
    finally:
        await store.vectors.close()
