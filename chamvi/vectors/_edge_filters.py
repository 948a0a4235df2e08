"""The protocol's filters and selectors as Qdrant Edge's (``qdrant_edge``) objects."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import qdrant_edge as qe

from chamvi.vectors._types import Condition, IsEmpty, Match, MatchAny, Scalar, Where


def _value(value: Scalar) -> object:
    # qdrant-edge-py 0.9 reads a Python bool as an integer (bool subclasses int), so a bool filter
    # matches nothing; numpy's bool is no int and arrives as a bool
    return np.bool_(value) if isinstance(value, bool) else value


def _condition(condition: Condition) -> qe.FieldCondition | qe.IsEmptyCondition:
    if isinstance(condition, Match):
        return qe.FieldCondition(condition.key, match=qe.MatchValue(_value(condition.value)))  # type: ignore[arg-type]
    if isinstance(condition, MatchAny):
        values: list[str] | list[int] = list(condition.values)  # type: ignore[assignment]
        return qe.FieldCondition(condition.key, match=qe.MatchAny(values))
    assert isinstance(condition, IsEmpty)
    return qe.IsEmptyCondition(condition.key)


def edge_filter(where: Where | None) -> qe.Filter | None:
    """``where`` as an Edge filter (None stays None)."""
    if where is None:
        return None
    return qe.Filter(
        must=[_condition(c) for c in where.must] or None,
        must_not=[_condition(c) for c in where.must_not] or None,
    )


def selector(payload: bool | Sequence[str]) -> bool | list[str]:
    """A payload selector: all, none, or these keys."""
    return payload if isinstance(payload, bool) else list(payload)
