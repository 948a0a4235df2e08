"""A per-worker cap on runs executing at once: the seed's ``concurrencyMaxRuns`` (default 4).

On Temporal a run is a workflow, and what it executes in a worker process is its model calls and tool
calls (the ``chamvi.call_model``, ``chamvi.call_tool`` and ``chamvi.extract`` activities). So a run
holds one of this process's slots while one of those activities runs here (calls of one run that
overlap, a retried call beside its stale attempt, share it), a run between two calls holds none, and
a run waiting for a person, for another run (``ctx.wait_for``) or for its concurrency key holds none
either, as the seed says of a waiting run. The call of a fifth run waits for a slot, first come first
served, inside its activity and heartbeating (its timeout counts the wait). Knowledge passes,
searches, state listings and the short bookkeeping activities never take a slot.

Temporal's own ``max_concurrent_activities`` cannot say this: it counts every activity, knowledge
passes included, and one run's parallel tool calls as several.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

from chamvi.errors import InvalidAppError

DEFAULT_MAX_RUNS = 4
"""The seed's ``concurrencyMaxRuns`` default; ``bench/max_runs.py`` measures others."""


class RunSlots:
    """At most ``limit`` runs executing at once in this process; the calls of one run share a slot.

    Args:
        limit: the most runs at once (``--max-runs``, ``CHAMVI_MAX_RUNS``).

    Raises:
        InvalidAppError: ``limit`` is not a positive whole number.
    """

    def __init__(self, limit: int = DEFAULT_MAX_RUNS) -> None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidAppError(f"max_runs must be a positive whole number, not {limit!r}")
        self.limit = limit
        self._calls: dict[str, int] = {}
        """The runs holding a slot, with how many of their calls run now."""
        self._waiting: deque[tuple[str, asyncio.Future[None]]] = deque()
        self.peak = 0
        """The most runs that held a slot at once (for benchmarks and tests)."""

    @property
    def executing(self) -> int:
        """How many runs hold a slot now."""
        return len(self._calls)

    @property
    def waiting(self) -> int:
        """How many calls wait for a slot now."""
        return len(self._waiting)

    @contextlib.asynccontextmanager
    async def slot(self, run_id: str) -> AsyncIterator[None]:
        """Holds ``run_id``'s slot while the block runs: taken first, or shared with its other calls."""
        await self._take(run_id)
        try:
            yield
        finally:
            self._leave(run_id)

    async def _take(self, run_id: str) -> None:
        if run_id in self._calls:
            self._calls[run_id] += 1
            return
        if len(self._calls) < self.limit and not self._waiting:
            self._hold(run_id)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((run_id, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._leave(run_id)  # granted as it was cancelled: hand the slot on
            else:
                self._waiting.remove((run_id, granted))
            raise

    def _hold(self, run_id: str) -> None:
        self._calls[run_id] = self._calls.get(run_id, 0) + 1
        self.peak = max(self.peak, len(self._calls))

    def _leave(self, run_id: str) -> None:
        left = self._calls[run_id] - 1
        if left:
            self._calls[run_id] = left
            return
        del self._calls[run_id]
        while self._waiting and len(self._calls) < self.limit:
            waiter, _ = self._waiting[0]
            # the run's other waiting calls come in with it: they share its slot
            for entry in [entry for entry in self._waiting if entry[0] == waiter]:
                self._waiting.remove(entry)
                self._hold(waiter)
                entry[1].set_result(None)
