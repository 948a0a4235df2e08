"""Artifacts as references: what travels through Temporal history in place of a file's bytes."""

from __future__ import annotations

from pydantic import BaseModel


class Artifact(BaseModel):
    """A file a run received (an attachment) or made (``ctx.artifacts.put``), by reference.

    The bytes stay in the artifact store (``chamvi.artifacts``); history, checkpoints and the
    trigger envelope carry this record only, a few hundred bytes whatever the file's size.
    """

    id: str
    """``<run_id>.0000``, ``<run_id>.0001``, ... in the order the run received or made them."""
    run_id: str
    media_type: str
    filename: str | None = None
    size: int
    sha256: str
