"""Where chamvi keeps vectors and payloads: one storage protocol, Qdrant Edge or qdrant-client behind it."""

from chamvi.vectors._types import (
    RRF_K,
    SPARSE_VECTOR,
    CollectionNotFoundError,
    Condition,
    Distance,
    FieldType,
    IsEmpty,
    Match,
    MatchAny,
    Point,
    Record,
    Scored,
    SparseVector,
    StoreBusyError,
    VectorStore,
    Where,
)

__all__ = [
    "RRF_K",
    "SPARSE_VECTOR",
    "CollectionNotFoundError",
    "Condition",
    "Distance",
    "FieldType",
    "IsEmpty",
    "Match",
    "MatchAny",
    "Point",
    "Record",
    "Scored",
    "SparseVector",
    "StoreBusyError",
    "VectorStore",
    "Where",
]
