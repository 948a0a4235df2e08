"""The backoff of failed passes, and how soon a lost pass is noticed."""

from datetime import timedelta

from chamvi.retry import PASS_HEARTBEAT_INTERVAL, PASS_HEARTBEAT_TIMEOUT, backoff


def test_the_pass_backoff_starts_at_5_seconds_doubles_and_stops_at_5_minutes() -> None:
    assert [backoff(n).total_seconds() for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]
    assert backoff(50) == timedelta(minutes=5)


def test_a_lost_pass_is_noticed_after_three_missed_heartbeats_not_minutes_later() -> None:
    assert PASS_HEARTBEAT_TIMEOUT == 3 * PASS_HEARTBEAT_INTERVAL
    assert timedelta(seconds=30) >= PASS_HEARTBEAT_TIMEOUT
