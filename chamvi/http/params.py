"""The path parameters routes share, each with the rule the server enforces, stated in the document.

A path parameter that names something stored (a run, an artifact, an agent) is checked here, by the
route's own validation, before the route touches Temporal or a store: a malformed one answers 422
``validation_error`` naming the parameter, and the OpenAPI document states the same pattern and
length, so a request the document calls valid is one the server takes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from chamvi.constants import (
    ARTIFACT_ID_MAX_LENGTH,
    ARTIFACT_ID_PATTERN,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    RUN_ID_MAX_LENGTH,
    RUN_ID_PATTERN,
)

RunId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=RUN_ID_MAX_LENGTH,
        pattern=RUN_ID_PATTERN,
        description="The run id dispatch answered: letters, digits, '.', '_', '-' and single ':' between "
        "them",
        examples=["run-support-0f8e4c2a9b7d4e6f8a1b2c3d4e5f6a7b"],
    ),
]
ArtifactId = Annotated[
    str,
    Path(
        min_length=6,
        max_length=ARTIFACT_ID_MAX_LENGTH,
        pattern=ARTIFACT_ID_PATTERN,
        description="An artifact id, `<run_id>.0000`, as `GET /runs/{run_id}/artifacts` lists them",
        examples=["run-support-0f8e4c2a9b7d4e6f8a1b2c3d4e5f6a7b.0000"],
    ),
]
AgentName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=NAME_MAX_LENGTH,
        pattern=NAME_PATTERN,
        description="The agent's name: lowercase words joined by '-'",
        examples=["support"],
    ),
]
