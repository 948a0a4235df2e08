"""Where chamvi keeps vectors and payloads: one storage protocol, Qdrant Edge or qdrant-client behind it."""

from chamvi.vectors._types import (
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
    StoreBusyError,
    VectorStore,
    Where,
)

__all__ = [
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
    "StoreBusyError",
    "VectorStore",
    "Where",
]
