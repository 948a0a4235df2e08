"""What a Qdrant Edge shard's files say about themselves: sizes its segments' own metadata fix.

Edge (qdrant-edge-py 0.9) trusts its files. A data file cut short (a full disk, a copy that stopped,
a restore from a bad backup) loads without a word and fails later, at the first search that reads
past the cut ("vector 15 is not readable"), or, for a status file, panics in Rust at load. So a
shard is checked before it is loaded, against what its segments record:

* ``vector_storage*/**/config.json`` of a segment that takes writes names ``chunk_size_bytes``: every
  ``chunk_<n>.mmap`` beside it is that long, and its ``status.dat`` (the vector count, a little-endian
  u64) needs ``ceil(count / chunk_size_vectors)`` of them;
* a ``config.json`` that names ``page_size_bytes`` (payloads and keyword indexes): every
  ``page_<n>.dat`` beside it is that long;
* an indexed segment's ``matrix.dat`` holds a 4-byte header and ``count`` float32 vectors of
  ``actual_dim``, and its ``id_tracker.versions`` one u64 per point, as its ``quantized.meta.json``
  records them (a versions file cut short loads as a segment with fewer points, without a word).

Not checked: the id tracker of a segment that takes writes, which Edge reads as far as it is whole
(its own recovery from a torn write: a mapping log cut at an entry loads fewer points, without a
word), and anything else whose size no metadata records; a load that fails or panics on those is
reported the same way by the store.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

_MATRIX_HEADER = 4
_FLOAT32 = 4


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # Edge's own load names an unreadable or cut metadata file
    return data if isinstance(data, dict) else None


def _cut(path: Path, expected: int, shard: Path, why: str) -> str | None:
    size = path.stat().st_size
    if size == expected:
        return None
    return f"{path.relative_to(shard)} is {size} bytes where {why} says {expected}"


def _chunks(folder: Path, config: dict[str, Any], shard: Path) -> str | None:
    chunk_bytes, chunk_vectors = config.get("chunk_size_bytes"), config.get("chunk_size_vectors")
    if not isinstance(chunk_bytes, int) or not isinstance(chunk_vectors, int) or chunk_vectors < 1:
        return None
    chunks = sorted(folder.glob("chunk_*.mmap"))
    for chunk in chunks:
        if problem := _cut(chunk, chunk_bytes, shard, "its config.json"):
            return problem
    status = folder / "status.dat"
    if status.is_file() and status.stat().st_size >= 8:
        count = int.from_bytes(status.read_bytes()[:8], "little")
        needed = math.ceil(count / chunk_vectors)
        if len(chunks) < needed:
            return (
                f"{folder.relative_to(shard)} holds {len(chunks)} vector chunk files where its status.dat "
                f"counts {count} vectors, {needed} chunks"
            )
    return None


def _pages(folder: Path, config: dict[str, Any], shard: Path) -> str | None:
    page_bytes = config.get("page_size_bytes")
    if not isinstance(page_bytes, int):
        return None
    for page in sorted(folder.glob("page_*.dat")):
        if problem := _cut(page, page_bytes, shard, "its config.json"):
            return problem
    return None


def _matrix(folder: Path, shard: Path) -> str | None:
    matrix, meta = folder / "matrix.dat", _json(folder / "quantized.meta.json")
    if not matrix.is_file() or meta is None:
        return None
    parameters = meta.get("vector_parameters") or {}
    count, dim = parameters.get("count"), meta.get("actual_dim")
    if not isinstance(count, int) or not isinstance(dim, int):
        return None
    versions = folder.parent / "id_tracker.versions"  # one version (u64) per point of the segment
    if versions.is_file() and (problem := _cut(versions, count * 8, shard, "its quantized.meta.json")):
        return problem
    return _cut(matrix, _MATRIX_HEADER + count * dim * _FLOAT32, shard, "its quantized.meta.json")


def shard_damage(shard: Path) -> str | None:
    """The first file of ``shard`` whose size disagrees with its segment's metadata; None: none found."""
    for segment in sorted((shard / "segments").glob("*/")):
        for config_path in sorted(segment.rglob("config.json")):
            config = _json(config_path)
            if config is None:
                continue
            folder = config_path.parent
            if problem := _chunks(folder, config, shard) or _pages(folder, config, shard):
                return problem
        for quantized in sorted(segment.rglob("quantized.meta.json")):
            if problem := _matrix(quantized.parent, shard):
                return problem
    return None
