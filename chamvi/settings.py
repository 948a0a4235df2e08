"""One settings object, built at the entry points (worker, CLI) from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from chamvi.constants import TASK_QUEUE

DEFAULT_APP = "examples.support.app:app"


@dataclass(frozen=True)
class Settings:
    """Where Temporal is, which app to serve, where local state lives.

    ``temporal_address``/``temporal_namespace`` left as None fall back to Temporal's own
    configuration (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_PROFILE`` and the
    ``temporal.toml`` profiles), then to ``localhost:7233`` / ``default``.
    """

    temporal_address: str | None = None
    temporal_namespace: str | None = None
    task_queue: str = TASK_QUEUE
    app: str = DEFAULT_APP
    data: Path = Path(".chamvi")
    qdrant_url: str | None = None
    qdrant_prefix: str = "chamvi"
    knowledge_model: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from environment variables (``os.environ`` unless ``env`` is given).

        Unset or empty variables take the defaults.
        """
        env = os.environ if env is None else env
        return cls(
            temporal_address=env.get("TEMPORAL_ADDRESS") or None,
            temporal_namespace=env.get("TEMPORAL_NAMESPACE") or None,
            task_queue=env.get("CHAMVI_TASK_QUEUE") or TASK_QUEUE,
            app=env.get("CHAMVI_APP") or DEFAULT_APP,
            data=Path(env.get("CHAMVI_DATA") or ".chamvi"),
            qdrant_url=env.get("QDRANT_URL") or None,
            qdrant_prefix=env.get("CHAMVI_QDRANT_PREFIX") or "chamvi",
            knowledge_model=env.get("CHAMVI_KNOWLEDGE_MODEL") or None,
        )

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with the given fields replaced; None keeps a field, so unset CLI options change nothing."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]
