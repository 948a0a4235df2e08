"""What providers' HTTP answers share: how long a server asked to wait before a retry."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def parse_retry_after(headers: Mapping[str, str] | None, now: datetime | None = None) -> float | None:
    """Seconds to wait before retrying, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be a number of seconds or an HTTP date. Values that cannot be read are
    ignored (Temporal's backoff applies); values in the past count as zero.
    """
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
