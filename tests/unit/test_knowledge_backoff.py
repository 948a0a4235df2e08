"""The backoff of failed passes."""

from datetime import timedelta

from chamvi.retry import backoff


def test_the_pass_backoff_starts_at_5_seconds_doubles_and_stops_at_5_minutes() -> None:
    assert [backoff(n).total_seconds() for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]
    assert backoff(50) == timedelta(minutes=5)
