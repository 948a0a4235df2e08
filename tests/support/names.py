"""Names for things that live in the whole Temporal namespace the tests share."""

from __future__ import annotations

import uuid


def unique(prefix: str) -> str:
    """Schedules, agent names and run lists span the namespace, not one test's task queue."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
