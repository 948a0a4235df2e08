"""``App(on_error=...)``: errors with no caller to throw to reach the hook; without one they are logged."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from chamvi import App
from chamvi._lifecycle import boot_collections, memory_index
from chamvi._on_error import ErrorHook
from chamvi.errors import BackgroundError, InvalidAppError
from chamvi.run_events import RUN_STEP, EventHub, RunEvent
from chamvi.runtime import load_app
from chamvi.schedules import define_schedule
from chamvi.worker_state import AppRuntime


class Collected:
    """An ``on_error`` that keeps what it was given."""

    def __init__(self) -> None:
        self.errors: list[tuple[BackgroundError, str | None]] = []

    def __call__(self, error: BackgroundError, run_id: str | None) -> None:
        self.errors.append((error, run_id))


async def unreachable_temporal() -> Client:
    """A client to a port nothing listens on: every call fails, as with Temporal down."""
    return await Client.connect("127.0.0.1:1", lazy=True, data_converter=pydantic_data_converter)


def step(run_id: str = "run-1") -> RunEvent:
    return RunEvent(type=RUN_STEP, run_id=run_id, event_id=7, data={"step": 0})


async def test_a_listener_that_raises_reaches_on_error_with_its_run_and_others_still_hear() -> None:
    collected = Collected()
    hub = EventHub(errors=ErrorHook(collected))
    heard: list[str] = []

    def broken(event: RunEvent) -> None:
        raise ValueError("listener bug")

    async def broken_later(event: RunEvent) -> None:
        raise KeyError("async listener bug")

    hub.on(RUN_STEP, broken)
    hub.on(RUN_STEP, broken_later)
    hub.on("*", lambda event: heard.append(event.run_id))
    hub.emit(step("run-7"))
    await asyncio.sleep(0)  # the coroutine listener's task
    await asyncio.sleep(0)

    assert heard == ["run-7"]
    assert [(e.source, type(e.cause).__name__, run) for e, run in collected.errors] == [
        ("listener", "ValueError", "run-7"),
        ("listener", "KeyError", "run-7"),
    ]
    first = collected.errors[0][0]
    assert first.code == "background_error" and "failed on run.step of run run-7" in first.message


async def test_a_declared_listener_that_raises_reaches_the_apps_on_error_from_each_worker() -> None:
    collected = Collected()
    app = App(agents=[], on_error=collected)
    app.on(RUN_STEP, lambda event: print(1 / 0))
    for runtime in (AppRuntime(app), AppRuntime(app)):  # two workers' hubs, one App's hook
        runtime.events.emit(step("run-3"))
    assert [(e.source, type(e.cause).__name__, run) for e, run in collected.errors] == [
        ("listener", "ZeroDivisionError", "run-3"),
        ("listener", "ZeroDivisionError", "run-3"),
    ]


def divide_by_zero(event: RunEvent) -> None:
    """A listener with a bug."""
    print(1 / 0)


async def test_without_a_hook_a_failing_listener_is_logged_as_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = EventHub()
    hub.on(RUN_STEP, divide_by_zero)
    with caplog.at_level(logging.ERROR, logger="chamvi.run_events"):
        hub.emit(step())
    assert [r.getMessage().split(" failed on ")[1] for r in caplog.records] == ["run.step"]
    assert caplog.records[0].exc_info is not None


async def test_a_hook_that_raises_is_logged_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    def failing(error: BackgroundError, run_id: str | None) -> None:
        raise RuntimeError("hook bug")

    async def failing_later(error: BackgroundError, run_id: str | None) -> None:
        raise RuntimeError("async hook bug")

    problem = BackgroundError("channel 'inbox' failed to stop", source="channel.stop")
    with caplog.at_level(logging.ERROR, logger="chamvi"):
        ErrorHook(failing).report(problem, lambda: None)
        later = ErrorHook(failing_later)
        later.report(problem, lambda: None)
        await later.drain()
    assert [r.getMessage() for r in caplog.records] == [
        "on_error raised while handling: channel 'inbox' failed to stop",
        "on_error raised while handling: channel 'inbox' failed to stop",
    ]


async def test_a_failed_sync_of_the_schedules_reaches_on_error(caplog: pytest.LogCaptureFixture) -> None:
    from chamvi.schedules import boot_schedules

    collected = Collected()
    declared = {"daily": define_schedule("support", cron="0 8 * * *", id="daily")}
    with caplog.at_level(logging.INFO, logger="chamvi"):
        await boot_schedules(await unreachable_temporal(), declared, "q", ErrorHook(collected))
    [(error, run_id)] = collected.errors
    assert (error.source, run_id) == ("schedules", None) and error.cause is not None
    assert error.message.startswith("schedules: keeping the app's schedules failed: ")
    assert caplog.records == []  # the hook replaced the log line


async def test_a_failed_start_of_the_collections_reaches_on_error() -> None:
    collected = Collected()
    app = load_app("examples.support.app:app")  # declares a collection: starting it asks Temporal
    await boot_collections(await unreachable_temporal(), app, memory_index(), "q", ErrorHook(collected))
    [(error, run_id)] = collected.errors
    assert (error.source, run_id) == ("collections", None)
    assert error.message.startswith("knowledge error: starting the collections failed: ")


def test_on_error_must_be_callable() -> None:
    bad: Any = "print"
    with pytest.raises(InvalidAppError, match="on_error must be a function of \\(error, run_id\\)"):
        App(agents=[], on_error=bad)
