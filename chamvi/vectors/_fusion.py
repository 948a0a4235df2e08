"""How a hybrid search fuses its dense and its sparse ranking: one rule, for every store.

Reciprocal rank fusion (RRF: a point scores the sum of ``1 / (RRF_K + rank)`` over the rankings
that hold it) of the dense ranking and of the sparse ranking's *decisive* head: BM25's best
passage, when it scores at least ``DECISIVE`` times the next one. A query naming a term that few
passages hold (an error code, a SKU, a flag) has such a head, and it takes one of the first two
places; a query in ordinary words matches many passages about as well, its BM25 ranking says
little, and the dense ranking stands as it is. Plain RRF of both rankings (Qdrant's own fusion)
lost a tenth of the paraphrase queries ``bench/knowledge.py`` finds by dense vectors alone: the
sparse ranking's noise pushed good passages out of the first five.
"""

from __future__ import annotations

from collections.abc import Sequence

from chamvi.vectors._types import RRF_K, Scored

DECISIVE = 1.2
"""How far BM25's best score must lead its second for the sparse ranking to count (measured)."""


def fuse(dense: Sequence[Scored], head: Scored | None, limit: int, min_score: float | None) -> list[Scored]:
    """RRF of ``dense`` (best first, scored by cosine) and the sparse ranking's decisive ``head``.

    ``head`` is scored by its cosine too, so every score answered is one. On a tie (the head and
    the dense ranking's first) the head goes first: a decisive BM25 match is a named thing the
    query asked for. Other ties keep the dense order. ``min_score`` drops points below that cosine,
    whichever ranking found them.
    """
    scores = {point.id: 1 / (RRF_K + rank) for rank, point in enumerate(dense, start=1)}
    points: dict[str, Scored] = {}
    if head is not None:
        scores[head.id] = scores.get(head.id, 0.0) + 1 / (RRF_K + 1)
        points[head.id] = head
    for point in dense:
        points.setdefault(point.id, point)
    fused = sorted(points.values(), key=lambda p: -scores[p.id])  # stable: ties keep this order
    return [p for p in fused if min_score is None or p.score >= min_score][:limit]


def decisive(bm25: Sequence[float]) -> bool:
    """Whether BM25's best score (of ``bm25``, best first) leads enough for its ranking to count."""
    if not bm25 or bm25[0] <= 0:
        return False
    return len(bm25) == 1 or bm25[0] >= DECISIVE * bm25[1]
