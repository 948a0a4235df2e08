"""The path parameters routes share, each with the rule the server enforces, stated in the document.

A path parameter that names something stored (a run, an artifact, an agent) is checked here, by the
route's own validation, before the route touches Temporal or a store: a malformed one answers 422
``validation_error`` naming the parameter, and the OpenAPI document states the same pattern and
length, so a request the document calls valid is one the server takes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path

from chamvi._constants import (
    ARTIFACT_ID_MAX_LENGTH,
    ARTIFACT_ID_PATTERN,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    RUN_ID_MAX_LENGTH,
    RUN_ID_PATTERN,
)


def _checked(max_length: int, pattern: str, description: str, example: str, min_length: int = 1) -> Any:
    """A path parameter with its rule: checked by the route's validation, stated in the document."""
    return Path(
        min_length=min_length,
        max_length=max_length,
        pattern=pattern,
        description=description,
        examples=[example],
    )


_RUN = "run-support-0f8e4c2a9b7d4e6f8a1b2c3d4e5f6a7b"
RunId = Annotated[
    str,
    _checked(
        RUN_ID_MAX_LENGTH,
        RUN_ID_PATTERN,
        "The run id dispatch answered: letters, digits, '.', '_', '-' and single ':' between them",
        _RUN,
    ),
]
ArtifactId = Annotated[
    str,
    _checked(
        ARTIFACT_ID_MAX_LENGTH,
        ARTIFACT_ID_PATTERN,
        "An artifact id, `<run_id>.0000`, as `GET /runs/{run_id}/artifacts` lists them",
        f"{_RUN}.0000",
        min_length=6,
    ),
]
AgentName = Annotated[
    str, _checked(NAME_MAX_LENGTH, NAME_PATTERN, "The agent's name: lowercase words joined by '-'", "support")
]
ScheduleId = Annotated[
    str,
    _checked(
        NAME_MAX_LENGTH, NAME_PATTERN, "The schedule's id: lowercase words joined by '-'", "daily-digest"
    ),
]
