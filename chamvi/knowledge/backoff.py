"""Timing of passes: the seed's backoff for failed passes (5 s, doubling, at most 5 min per failure
in a row) and how often a running pass heartbeats.

The workflow and the pass activity read both from here, so the heartbeat timeout the workflow sets
always leaves room for the interval the activity keeps.
"""

from datetime import timedelta

PASS_HEARTBEAT_INTERVAL = timedelta(seconds=10)
"""A running pass reports its counts this often (the Temporal UI shows them as heartbeat details)."""
PASS_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
"""A pass silent this long is lost (its worker was killed): the workflow fails it and, after the
backoff, runs the next attempt on whichever worker polls. Three intervals, so one late heartbeat on
a loaded machine is no loss, and a killed worker's pass resumes within about half a minute."""


def backoff(failures: int) -> timedelta:
    return timedelta(seconds=min(5 * 2 ** (failures - 1), 300))
