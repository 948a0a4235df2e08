"""How a workflow calls an activity and turns its final failure into the run's failure.

One place for what every activity call of ``AgentRun`` does the same way: schedule it with its
timeouts, retry policy and summary, and, when Temporal gives up on it, settle the run as failed
with the code the activity's error carried (``chamvi._activity_boundary`` typed it by its code).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from chamvi.errors import ChamviError, ChamviValidationError, ValidationIssue

T = TypeVar("T")


class RunFailed(Exception):
    """Internal: settles the run as failed with a seed error code (and a validation's issues)."""

    def __init__(self, code: str, message: str, issues: list[ValidationIssue] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.issues = issues

    @classmethod
    def of(cls, error: ChamviError) -> RunFailed:
        """The failure for a chamvi error the workflow itself finds (a budget, a bad definition)."""
        issues = list(error.issues) if isinstance(error, ChamviValidationError) and error.issues else None
        return cls(error.code, error.message, issues)


def failure(error: ActivityError | ApplicationError) -> RunFailed:
    """The run failure for an activity that failed for good (a local activity's error arrives bare)."""
    cause = error.cause if isinstance(error, ActivityError) else error
    if isinstance(cause, ApplicationError):
        return RunFailed(cause.type or "activity_failed", cause.message, _issues(cause.details))
    return RunFailed("activity_failed", str(cause or error))


def _issues(details: Sequence[Any]) -> list[ValidationIssue] | None:
    """The validation issues an activity's failure carries (``chamvi._activity_boundary``), if any."""
    first = details[0] if details else None
    listed = first.get("issues") if isinstance(first, dict) else None
    if not isinstance(listed, list) or not listed:
        return None
    try:
        return [ValidationIssue(tuple(i["path"]), str(i["message"]), str(i["code"])) for i in listed]
    except (KeyError, TypeError):
        return None


async def settled(call: Awaitable[T]) -> T:
    """The result of an activity call; its final failure raises :class:`RunFailed`.

    Raises:
        RunFailed: Temporal gave up on the activity (its retry policy ran out or refused to retry).
    """
    try:
        return await call
    except (ActivityError, ApplicationError) as error:
        raise failure(error) from None


async def call_activity(
    activity: str,
    arg: Any,
    result_type: type[T],
    *,
    start_to_close: timedelta,
    retry_policy: RetryPolicy,
    summary: str,
    heartbeat: timedelta | None = None,
) -> T:
    """The activity's result (see :func:`settled`).

    Raises:
        RunFailed: Temporal gave up on the activity.
    """
    return await settled(
        workflow.execute_activity(
            activity,
            arg,
            result_type=result_type,
            start_to_close_timeout=start_to_close,
            heartbeat_timeout=heartbeat,
            retry_policy=retry_policy,
            summary=summary,
        )
    )
