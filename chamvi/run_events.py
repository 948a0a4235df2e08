"""Run events: what a run did, and the in-process hub that hands them to listeners and streams.

A run's events are derived from the workflow history, never stored beside it: the history already
records each model answer and tool result (activity results), each status change (the
``ChamviStatus`` search attribute upserts), each approval answer (signals and updates) and the end.
So every process reads the same events with the same ids (the history event id that caused them),
resumes from any of them, and waits for new ones on Temporal's own long-poll of the history
(``wait_new_event``), with no polling loop and nothing new in the workflow: ``chamvi.run_history``
reads them.

``run.delta`` (the model's text while it writes) is the exception: it is never stored, so only
listeners in the process that runs the model call see it (``App.on``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client

from chamvi._on_error import ErrorHook
from chamvi.errors import BackgroundError, InvalidInputError

log = logging.getLogger(__name__)

RUN_STARTED = "run.started"
RUN_STEP = "run.step"
RUN_WAITING = "run.waiting"
RUN_RESUMED = "run.resumed"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_CANCELLED = "run.cancelled"
RUN_DELTA = "run.delta"

EVENT_TYPES = (
    RUN_STARTED,
    RUN_STEP,
    RUN_WAITING,
    RUN_RESUMED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_CANCELLED,
    RUN_DELTA,
)
"""Every event type, in the order a run emits them."""

RECENT_RUNS = 64
"""Runs whose latest model step's deltas a process keeps for streams that join mid-call."""

FINAL_TYPES = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED})


@dataclass(frozen=True)
class RunEvent:
    """One thing a run did.

    Attributes:
        type: one of ``EVENT_TYPES``.
        run_id: the run.
        event_id: the id of the history event it comes from (increasing within a run; resume after
            it); None for ``run.delta``, which is not in the history.
        data: the type's fields (``step``, ``output``, ``error``, ...).
    """

    type: str
    run_id: str
    event_id: int | None
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The event as one flat JSON object: ``type``, ``run_id``, ``event_id`` and the data."""
        return {**self.data, "type": self.type, "run_id": self.run_id, "event_id": self.event_id}

    @property
    def final(self) -> bool:
        """Whether the run ended with this event (nothing follows it)."""
        return self.type in FINAL_TYPES


Listener = Callable[[RunEvent], Awaitable[None] | None]


def check_event_type(event_type: str) -> str:
    """``event_type`` if it is an event type, else an error naming the known ones."""
    if event_type not in EVENT_TYPES and event_type != "*":
        raise InvalidInputError(
            f"unknown run event type {event_type!r}: the types are "
            f"{', '.join(map(repr, EVENT_TYPES))}, or '*' for all"
        )
    return event_type


class Listeners:
    """Run event listeners by event type, as declared (``App.on``); they hold no worker's state.

    Each worker's :class:`EventHub` reads them as they are when an event comes, so a listener added
    after the worker was built is heard too.
    """

    def __init__(self) -> None:
        self._by_type: dict[str, list[Listener]] = {}

    def on(self, event_type: str, listener: Listener) -> Callable[[], None]:
        """Adds ``listener`` for ``event_type`` (``"*"``: all).

        Returns:
            A function that removes the listener.

        Raises:
            InvalidInputError: ``event_type`` is no event type, or ``listener`` is not callable.
        """
        check_event_type(event_type)
        if not callable(listener):
            raise InvalidInputError(f"the listener of {event_type!r} must be callable, not {listener!r}")
        self._by_type.setdefault(event_type, []).append(listener)
        return lambda: self._remove(event_type, listener)

    def _remove(self, event_type: str, listener: Listener) -> None:
        listeners = self._by_type.get(event_type, [])
        if listener in listeners:
            listeners.remove(listener)

    def of(self, event_type: str) -> list[Listener]:
        """The listeners of exactly ``event_type`` (``"*"`` names the catch-all ones)."""
        return self._by_type.get(event_type, [])


class EventHub:
    """One process's run events: the listeners' calls (``App.on``) and the streams that follow one run.

    A listener's failure goes to the error hook (else the log) and never reaches the model call or
    the stream that emitted the event; a coroutine listener runs as its own task.

    Args:
        declared: the App's listeners, read as they are at each event; the hub's own
            (:meth:`on`) are heard beside them and never written back to the App.
        errors: where a listener's failure (or a relay's) goes: the App's ``on_error`` hook, else
            the log.
        history: reads a run's events from its Temporal history (``chamvi.run_history``), for
            :meth:`follow`; given by the worker's runtime, since that reader builds this module's
            events and so sits above it. Without one, runs are not followed.
    """

    def __init__(
        self,
        declared: Listeners | None = None,
        errors: ErrorHook | None = None,
        history: Callable[[Client, str], AsyncIterator[RunEvent]] | None = None,
    ) -> None:
        self._declared = declared or Listeners()
        self._history = history
        self._errors = errors or ErrorHook()
        self._own = Listeners()
        self._tasks: set[asyncio.Task[None]] = set()
        self._queues: dict[str, list[asyncio.Queue[RunEvent]]] = {}
        self._following: dict[str, asyncio.Task[None]] = {}
        self._recent: OrderedDict[str, list[RunEvent]] | None = None
        """The deltas of each run's model call in progress, kept once streams may join mid-call."""

    def keep_recent_deltas(self) -> None:
        """Keeps the deltas of each run's latest model step, for streams that join while it writes.

        Deltas are never stored, so without this a stream opened a moment after the model began
        would miss its first words for good. The API serving a worker in the same process turns it
        on; memory stays bounded: one step's deltas for each of the last ``RECENT_RUNS`` runs.
        """
        if self._recent is None:
            self._recent = OrderedDict()

    def on(self, event_type: str, listener: Listener) -> Callable[[], None]:
        """Calls ``listener`` with every event of ``event_type`` (``"*"``: all) this hub sees.

        Returns:
            A function that removes the listener.
        """
        return self._own.on(event_type, listener)

    def _listeners(self, event_type: str) -> list[Listener]:
        return [*self._declared.of(event_type), *self._own.of(event_type)]

    def wants(self, event_type: str, run_id: str) -> bool:
        """Whether a listener or a stream of ``run_id`` wants ``event_type``.

        A delta nobody wants is not built at all.
        """
        return bool(
            self._declared.of(event_type)
            or self._own.of(event_type)
            or self._declared.of("*")
            or self._own.of("*")
            or self._queues.get(run_id)
            or (event_type == RUN_DELTA and self._recent is not None)
        )

    def streams(self, run_id: str) -> int:
        """How many streams watch ``run_id`` in this process (a closed one is forgotten at once)."""
        return len(self._queues.get(run_id, ()))

    def emit(self, event: RunEvent) -> None:
        """Hands ``event`` to its listeners, in the order they were added, and to the run's streams."""
        if event.type == RUN_DELTA and self._recent is not None:
            self._remember(event, self._recent)
        for queue in self._queues.get(event.run_id, ()):
            queue.put_nowait(event)
        for listener in [*self._listeners(event.type), *self._listeners("*")]:
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(functools.partial(self._done, event=event, listener=listener))
            except Exception as error:
                self._listener_failed(error, event, listener)

    def _listener_failed(self, error: BaseException, event: RunEvent, listener: Listener) -> None:
        message = f"run event listener {listener!r} failed on {event.type} of run {event.run_id}: {error!r}"
        self._errors.report(
            BackgroundError(message, source="listener", cause=error),
            lambda: log.error("run event listener %r failed on %s", listener, event.type, exc_info=error),
            event.run_id,
        )

    @staticmethod
    def _remember(delta: RunEvent, recent: OrderedDict[str, list[RunEvent]]) -> None:
        kept = recent.pop(delta.run_id, [])
        if kept and kept[0].data["step"] != delta.data["step"]:
            kept = []  # a new model step: the last one's words are in its run.step event
        kept.append(delta)
        recent[delta.run_id] = kept
        while len(recent) > RECENT_RUNS:
            recent.popitem(last=False)

    def _done(self, task: asyncio.Task[Any], *, event: RunEvent, listener: Listener) -> None:
        self._tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self._listener_failed(error, event, listener)

    def follow(self, client: Client, run_id: str) -> None:
        """Relays the run's events from its history to this process's listeners, once per run.

        A worker calls it when it starts a run, so ``App.on("run.step", ...)`` hears the runs this
        process started, each event once. Nothing is followed while no listener wants more than
        deltas (which need no following).
        """
        wanted = any(self._listeners(t) for t in ("*", *EVENT_TYPES) if t != RUN_DELTA)
        if self._history is None or not wanted or run_id in self._following:
            return
        task = asyncio.create_task(self._relay(client, run_id), name=f"chamvi events of {run_id}")
        self._following[run_id] = task
        task.add_done_callback(lambda _: self._following.pop(run_id, None))

    async def _relay(self, client: Client, run_id: str) -> None:
        assert self._history is not None
        try:
            async for event in self._history(client, run_id):
                self.emit(event)
        except Exception as error:
            failure = error
            line = f"stopped relaying the events of run {run_id!r} to this process's listeners"
            self._errors.report(
                BackgroundError(f"{line}: {failure!r}", source="listener", cause=failure),
                lambda: log.error("%s", line, exc_info=failure),
                run_id,
            )

    async def close(self) -> None:
        """Stops relaying every run's events (the worker is shutting down)."""
        tasks = list(self._following.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @contextlib.contextmanager
    def watching(self, run_id: str) -> Iterator[asyncio.Queue[RunEvent]]:
        """A queue of the events this process emits for ``run_id`` while the block runs.

        An SSE stream takes its deltas from it; it is forgotten when the block ends, so a closed
        stream holds nothing.
        """
        queue: asyncio.Queue[RunEvent] = asyncio.Queue()
        for delta in self._recent.get(run_id, ()) if self._recent is not None else ():
            queue.put_nowait(delta)
        self._queues.setdefault(run_id, []).append(queue)
        try:
            yield queue
        finally:
            queues = self._queues.get(run_id, [])
            queues.remove(queue)
            if not queues:
                del self._queues[run_id]


class DeltaOrder:
    """Puts a run's live deltas in their place among its history events, for one stream.

    Deltas arrive the moment the model writes; history events a moment after Temporal records them.
    So a delta of step N can overtake the events that came before that model call (``run.started``,
    the tool steps of step N-1). Each delta is held until the history events before its model call
    have been seen, then released, so a reader sees one run in one order.
    """

    def __init__(self) -> None:
        self._started = False
        self._calls: dict[int, int] = {}
        """Tool calls each model step asked for, by step."""
        self._tools: dict[int, int] = {}
        """Tool steps seen, by step."""
        self._held: list[RunEvent] = []
        self._written: set[int] = set()
        """Model steps whose run.step event was seen."""
        self._streamed: set[int] = set()
        """Model steps some of whose deltas this stream has let through."""

    def _ready(self, step: int) -> bool:
        if not self._started:
            return False
        before = step - 1
        return step == 0 or (before in self._calls and self._tools.get(before, 0) >= self._calls[before])

    def seen(self, event: RunEvent) -> list[RunEvent]:
        """Notes a history event; returns the held deltas it lets through, in order."""
        if event.type == RUN_STARTED:
            self._started = True
        elif event.type == RUN_STEP:
            step = int(event.data["step"])
            if event.data.get("kind") == "llm":
                self._calls[step] = len(event.data.get("tool_calls") or ())
                self._written.add(step)
            else:
                self._tools[step] = self._tools.get(step, 0) + 1
        return self._release()

    def delta(self, event: RunEvent) -> list[RunEvent]:
        """Takes a delta; returns it (after any held before it) when its place has come, else holds it."""
        step = int(event.data["step"])
        if step in self._written and step not in self._streamed:
            return []  # a replay of a step this stream has whole in its run.step event
        self._held.append(event)
        return self._release()

    def _release(self) -> list[RunEvent]:
        released: list[RunEvent] = []
        while self._held and self._ready(int(self._held[0].data["step"])):
            released.append(self._held.pop(0))
            self._streamed.add(int(released[-1].data["step"]))
        return released


def parse_event_id(value: str | None) -> int | None:
    """A ``Last-Event-ID`` as an event id; an error naming the problem when it is not one."""
    if value is None or not value.strip():
        return None
    try:
        parsed = int(value.strip())
    except ValueError:
        raise InvalidInputError(
            f"event id {value!r} is not an event id: send the `id` of the last event received"
        ) from None
    if parsed < 0:
        raise InvalidInputError(f"event id {value!r} is negative: event ids start at 1")
    return parsed


__all__ = [
    "EVENT_TYPES",
    "DeltaOrder",
    "EventHub",
    "RunEvent",
    "parse_event_id",
]
