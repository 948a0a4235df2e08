"""Agent state as it crosses a process: an item, a page of items, and what a listing asks and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

STATE_LIST_MAX = 100
"""The most items one listing answers: a page travels through history (a tool result, a listing)."""


class StateItem(BaseModel):
    """One stored item of a state collection, or one key-value entry, with when it was last written."""

    key: str
    value: Any = None
    updated_at: datetime | None = None


class StatePage(BaseModel):
    """A page of items, most recently written first; ``next_offset`` asks for the next page (None: last)."""

    items: list[StateItem] = Field(default_factory=list)
    next_offset: int | None = None


class StateListRequest(BaseModel):
    """Input of the ``chamvi.state_list`` activity: an agent's key-value entries, or one collection."""

    agent: str
    collection: str | None = None
    limit: int = Field(default=20, ge=1, le=STATE_LIST_MAX)
    offset: int = Field(default=0, ge=0)


class StateListing(BaseModel):
    """A page of one collection, or (no ``collection``) of the key-value entries and collection sizes."""

    agent: str
    collection: str | None = None
    page: StatePage = Field(default_factory=StatePage)
    collections: dict[str, int] = Field(default_factory=dict)
    """Without ``collection``: each declared collection and how many items it holds."""
