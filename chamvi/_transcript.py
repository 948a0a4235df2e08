"""Keeping a run's history linear in its steps.

Other Temporal agent integrations send the whole conversation as the input of every model
activity, so history grows with the square of the steps and a long run hits Temporal's 50 MB
limit. Here the workflow sends only the messages added since the previous model call (the
*delta*) with the count and a chained digest of what came before. The worker keeps each run's
transcript in a small cache; on a miss (another worker, a restart) it asks the workflow for the
prefix through a query, which reads memory and writes nothing to history.

This module is pure and deterministic: the workflow and the activity both import it.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from chamvi.models import Message

EMPTY_DIGEST = ""


def chain_digest(digest: str, messages: Iterable[Message]) -> str:
    """Extends ``digest`` over ``messages``: equal digests mean equal transcripts."""
    for message in messages:
        body = json.dumps(message.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256((digest + body).encode()).hexdigest()
    return digest


@dataclass
class _Entry:
    count: int
    digest: str
    messages: list[Message]


@dataclass
class TranscriptCache:
    """Per-process cache of run transcripts, least recently used first out."""

    max_runs: int = 256
    _entries: OrderedDict[str, _Entry] = field(default_factory=OrderedDict)

    def prefix(self, run_id: str, count: int, digest: str) -> list[Message] | None:
        """The cached transcript of ``run_id`` if it is exactly the prefix the workflow described."""
        entry = self._entries.get(run_id)
        if entry is None or entry.count != count or entry.digest != digest:
            return None
        self._entries.move_to_end(run_id)
        return entry.messages

    def store(self, run_id: str, messages: list[Message], digest: str) -> None:
        """Keeps a run's transcript for its next model call; past ``max_runs``, the least recent go first."""
        self._entries[run_id] = _Entry(count=len(messages), digest=digest, messages=messages)
        self._entries.move_to_end(run_id)
        while len(self._entries) > self.max_runs:
            self._entries.popitem(last=False)
