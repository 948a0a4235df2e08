"""``python -m chamvi.vectors._optimize SHARD INDEXES WORKER``: builds a Qdrant Edge shard's search index.

Run by ``EdgeStore.optimize`` in a child process, on a copy of the shard: qdrant-edge-py holds the
GIL for the whole build, which would stop the worker's event loop for as long.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import qdrant_edge as qe

from chamvi._parent_death import die_with_parent
from chamvi.vectors.edge import _SCHEMAS


def main(path: str, deferred: dict[str, str], worker: int) -> None:
    """Loads the shard, runs Edge's optimizers until none is planned, adds the deferred indexes, closes.

    The deferred payload indexes (``edge.DEFERRED``) come after the build, so they are written to
    disk from the indexed segment and never held in this process's heap. The build dies with the
    worker that started it: a worker killed mid-build leaves no build behind (its copy is a
    leftover the next open removes), which would hold its memory beside the next worker's.
    SIGKILL, since Edge's build holds the GIL and no Python handler would run.
    """
    die_with_parent(signal.SIGKILL)
    if os.getppid() != worker:
        raise SystemExit(f"the worker {worker} that asked for this build is gone")
    shard = qe.EdgeShard.load(path)
    shard.optimize()
    for key, kind in deferred.items():
        shard.update(qe.UpdateOperation.create_field_index(key, _SCHEMAS[kind]))  # type: ignore[index]
    shard.flush()
    shard.close()


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]))
