"""The one place a ``ChamviError`` becomes a Temporal failure: the activity boundary.

An activity raises chamvi's own errors; this interceptor (added by ``ChamviPlugin``) turns each into
an ``ApplicationError`` typed by its code, carrying the provider's ``retry-after`` as the next retry
delay. It never marks a failure non-retryable: the retry policies decide, by code (``chamvi.retry``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from chamvi.errors import ChamviError


def as_failure(error: ChamviError) -> ApplicationError:
    """``error`` as Temporal sees it: type = its code, and the wait the other side asked for."""
    delay = timedelta(seconds=error.retry_after) if error.retry_after is not None else None
    return ApplicationError(error.message, type=error.code, next_retry_delay=delay)


class _TranslatingInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await self.next.execute_activity(input)
        except ChamviError as error:
            raise as_failure(error) from None


class ActivityErrors(Interceptor):
    """Applies :func:`as_failure` to every activity of the worker."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wraps the activity inbound chain."""
        return _TranslatingInbound(next)
