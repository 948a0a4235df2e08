"""The seed's backoff for failed passes: 5 s, doubling, at most 5 min per failure in a row."""

from datetime import timedelta


def backoff(failures: int) -> timedelta:
    return timedelta(seconds=min(5 * 2 ** (failures - 1), 300))
