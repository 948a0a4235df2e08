"""Embedding calls of one pass in flight together, and the pause a rate limit puts on all of them.

A hosted embedding API answers a call of 64 passages in ~200 ms, nearly all of it latency: one call
at a time, a first index of 15 000 passages waits ~50 s on it. A pass keeps up to
``embedding_concurrency`` calls in flight (default 4), still 64 passages each, and lands their
vectors in the order it sent them, so the documents are written as they were read. Memory stays
bounded: the passages of the calls in flight, and the documents they belong to.

A call answered 429 (rate limited) is tried again after the provider's ``retry-after`` (else a
backoff), and every call of the pass about to start waits as long: a rate-limited provider slows the
pass, it does not fail it while the retries last (``RATE_LIMIT_RETRIES`` per call, beyond the
collection's own retry policy).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine
from typing import Any

EMBEDDING_CONCURRENCY = 4
RATE_LIMIT_RETRIES = 10
"""Times one embedding call is tried again after a 429 before the pass fails (and backs off)."""
MAX_RATE_LIMIT_WAIT = 60.0
"""The longest a 429 without ``retry-after`` makes the pass wait (a backoff from 1 s, doubling)."""

Vectors = list[list[float]]


class RatePause:
    """A pass's shared wait after a rate limit: a call about to start waits until it is over."""

    def __init__(self) -> None:
        self._until = 0.0

    def hold(self, seconds: float) -> None:
        """Makes every call starting in the next ``seconds`` wait for their end."""
        now = asyncio.get_running_loop().time()
        self._until = max(self._until, now + max(0.0, seconds))

    async def wait(self) -> None:
        """Returns once no pause is under way."""
        loop = asyncio.get_running_loop()
        while (delay := self._until - loop.time()) > 0:
            await asyncio.sleep(delay)


class EmbeddingWindow:
    """Up to ``size`` embedding calls in flight, landed in the order they were sent.

    A call that ends before an older one no longer counts as in flight: the next call is sent at
    once rather than after the older one lands (at a hosted API the calls end in any order, and
    waiting for the oldest would leave a quarter of a window of 4 idle). Its vectors wait, with
    those of at most ``2 * size`` calls in all, so the memory a pass holds stays bounded.

    Args:
        size: how many calls may be in flight at once (1: one at a time).
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._calls: deque[asyncio.Task[Vectors]] = deque()

    def __len__(self) -> int:
        return len(self._calls)

    @property
    def _backlogged(self) -> bool:
        return len(self._calls) >= 2 * self.size

    @property
    def full(self) -> bool:
        """Whether a call must end (or land) before the next one is sent."""
        return self._backlogged or sum(not call.done() for call in self._calls) >= self.size

    @property
    def ready(self) -> bool:
        """Whether the call sent first among those held has ended: ``land`` answers at once."""
        return bool(self._calls) and self._calls[0].done()

    def send(self, call: Coroutine[Any, Any, Vectors]) -> None:
        """Starts ``call``; ``land`` answers its vectors after those of the calls sent before it."""
        self._calls.append(asyncio.ensure_future(call))

    async def wait(self) -> None:
        """Waits until a call in flight ends (the first one sent, when the window holds its most)."""
        calls = [self._calls[0]] if self._backlogged else [c for c in self._calls if not c.done()]
        if calls:
            await asyncio.wait(calls, return_when=asyncio.FIRST_COMPLETED)

    async def land(self) -> Vectors:
        """The vectors of the call sent first among those held (waiting for it)."""
        return await self._calls.popleft()

    async def close(self) -> None:
        """Cancels the calls still in flight (a pass that failed, or a refusal to sort out one by one)."""
        calls, self._calls = list(self._calls), deque()
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
