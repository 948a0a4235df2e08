"""The one place a ``ChamviError`` becomes a Temporal failure: the activity boundary.

An activity raises chamvi's own errors; this interceptor (added by ``ChamviPlugin``) turns each into
an ``ApplicationError`` typed by its code, carrying the provider's ``retry-after`` as the next retry
delay. It never marks a failure non-retryable: the retry policies decide, by code (``chamvi.retry``).

A chamvi error is expected (an unknown agent, a provider that is down) and its message says all there
is to say, so the worker logs it as one line naming the run, and the failure is marked benign so the
SDK does not log it again with a traceback (an activity that logged it itself marks it ``reported``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from chamvi.errors import ChamviError, ChamviValidationError

log = logging.getLogger(__name__)


def as_failure(error: ChamviError) -> ApplicationError:
    """``error`` as Temporal sees it: type = its code, and the wait the other side asked for.

    A validation error's issues travel as its details (``{"issues": [...]}``), so a run it fails
    shows them.
    """
    delay = timedelta(seconds=error.retry_after) if error.retry_after is not None else None
    details: tuple[Any, ...] = ()
    if isinstance(error, ChamviValidationError) and error.issues:
        details = ({"issues": [asdict(issue) for issue in error.issues]},)
    return ApplicationError(
        error.message,
        *details,
        type=error.code,
        next_retry_delay=delay,
        category=ApplicationErrorCategory.BENIGN,
    )


class _TranslatingInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await self.next.execute_activity(input)
        except ChamviError as error:
            if not error.reported:
                info = activity.info()
                log.warning("%s %s: %s", info.workflow_type, info.workflow_id, error.message)
            raise as_failure(error) from None


class ActivityErrors(Interceptor):
    """Applies :func:`as_failure` to every activity of the worker."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wraps the activity inbound chain."""
        return _TranslatingInbound(next)
