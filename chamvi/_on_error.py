"""``App(on_error=...)``: where errors with no caller to throw to go (the seed's ``onError(error, run?)``).

A channel whose ``start`` or ``stop`` raised, a run event listener that raised, a failed sync of the
app's schedules or of its collections, a failed knowledge pass (retried on its backoff): the worker
goes on, and the error goes to the hook as a :class:`~chamvi.errors.BackgroundError` (``source``
says what failed, ``cause`` is what it raised), with the run's id when it concerns one. Without a
hook each is logged as one line, as always.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from chamvi.errors import BackgroundError, InvalidAppError

log = logging.getLogger(__name__)

OnError = Callable[[BackgroundError, str | None], Any]
"""``on_error(error, run_id)``: a function or a coroutine function; ``run_id`` is None unless the error
concerns one run (a listener that failed on one of its events)."""


class ErrorHook:
    """Hands background errors to the app's ``on_error``, or logs them when it has none.

    Args:
        handler: the app's ``on_error``; None logs each error as its source always has.

    Raises:
        InvalidAppError: ``handler`` is not callable.
    """

    def __init__(self, handler: OnError | None = None) -> None:
        if handler is not None and not callable(handler):
            raise InvalidAppError(f"on_error must be a function of (error, run_id), not {handler!r}")
        self.handler = handler
        self._tasks: set[asyncio.Task[Any]] = set()

    def report(self, error: BackgroundError, default: Callable[[], None], run_id: str | None = None) -> None:
        """Calls the hook with ``error`` (a coroutine hook runs as a task of its own), else ``default``.

        A hook that raises is logged with the error it was given, and never raises here: the worker
        goes on whatever the hook does.
        """
        if self.handler is None:
            default()
            return
        try:
            result = self.handler(error, run_id)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(lambda done: self._done(done, error))
        except Exception:
            log.exception("on_error raised while handling: %s", error.message)

    def _done(self, task: asyncio.Task[Any], error: BackgroundError) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("on_error raised while handling: %s", error.message, exc_info=task.exception())

    async def drain(self) -> None:
        """Waits for the coroutine hooks still running (a worker's end, a test)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
