"""``python -m chamvi.vectors._optimize SHARD``: builds a Qdrant Edge shard's search index, then exits.

Run by ``EdgeStore.optimize`` in a child process, on a copy of the shard: qdrant-edge-py holds the
GIL for the whole build, which would stop the worker's event loop for as long.
"""

from __future__ import annotations

import sys

import qdrant_edge as qe


def main(path: str) -> None:
    """Loads the shard at ``path``, runs Edge's optimizers until none is planned, flushes, closes."""
    shard = qe.EdgeShard.load(path)
    shard.optimize()
    shard.flush()
    shard.close()


if __name__ == "__main__":
    main(sys.argv[1])
