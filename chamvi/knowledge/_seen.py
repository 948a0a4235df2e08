"""The documents one pass has read, in about 8 bytes each, so that it can tell what is gone.

A pass used to write a "seen" mark on the registry entry of every document it read, then delete the
entries without this pass's mark. In Qdrant's local mode on disk each such write is a stored row (one
SQLite transaction), so a pass that changed nothing still wrote every entry. The pass now keeps the
ids it read here instead and writes only what changed.

An id is kept as the first 8 bytes of its BLAKE2b digest: two ids of a 100 000-document collection
share a key with a probability near 3e-10, in which case the second would be reported as yielded
twice and skipped (and, once the first is gone, kept): a risk far below a disk error's. The keys sit
in sorted runs of unsigned 64-bit integers (``array('Q')``) merged as they grow, plus a small set of
the latest ids, so the whole costs about 8 bytes per document instead of the ~70 of a Python set of
ints or the hundreds of a set of strings.
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from bisect import bisect_left

_RECENT = 4096
"""Keys held in a plain set before they are merged into the sorted array."""


def _key(document_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(document_id.encode(), digest_size=8).digest(), "big")


class SeenIds:
    """A set of ids (a pass keeps the ids of the documents it read) at 8 bytes per id.

    ``in`` answers in O(log n).
    """

    def __init__(self) -> None:
        self._sorted = array("Q")
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, document_id: str) -> bool:
        return self._has(_key(document_id))

    def add(self, document_id: str) -> bool:
        """Adds ``document_id``; False when it was there already (a source yielded it twice)."""
        key = _key(document_id)
        if self._has(key):
            return False
        self._recent.add(key)
        # merging costs a pass over the array: merge less often as it grows, so the total stays
        # near-linear in the documents read
        if len(self._recent) >= max(_RECENT, len(self._sorted) // 8):
            self._merge()
        return True

    def _has(self, key: int) -> bool:
        if key in self._recent:
            return True
        position = bisect_left(self._sorted, key)
        return position < len(self._sorted) and self._sorted[position] == key

    def _merge(self) -> None:
        self._sorted = array("Q", heapq.merge(self._sorted, sorted(self._recent)))
        self._recent.clear()
