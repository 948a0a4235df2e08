"""The in-process listeners of run events (``App.on``) and reading a ``Last-Event-ID``."""

from __future__ import annotations

import pytest

from chamvi import App, RunEvent, define_agent
from chamvi.errors import InvalidInputError
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from chamvi.run_events import RECENT_RUNS, DeltaOrder, EventHub, parse_event_id


def make_app() -> App:
    models = ModelRegistry()
    models.register("scripted/echo", ScriptedModel([reply("done")]))
    return App(
        agents=[define_agent(name="echo", model="scripted/echo", instructions="Answer.")], models=models
    )


def delta(text: str, run_id: str = "run-1") -> RunEvent:
    return RunEvent("run.delta", run_id, None, {"step": 0, "kind": "text", "text": text})


def test_an_unknown_event_type_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(
        InvalidInputError, match=r"unknown run event type 'run.finished': the types are 'run.started'"
    ):
        make_app().on("run.finished", print)


def test_a_listener_that_fails_is_logged_and_the_others_still_hear_the_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = EventHub()
    heard: list[str] = []

    def broken(event: RunEvent) -> None:
        raise ValueError("listener bug")

    hub.on("run.delta", broken)
    hub.on("*", lambda event: heard.append(event.data["text"]))
    hub.emit(delta("Hel"))

    assert heard == ["Hel"]
    assert "listener bug" in caplog.text


def test_a_removed_listener_hears_nothing_and_a_delta_nobody_wants_is_not_built() -> None:
    hub = EventHub()
    heard: list[RunEvent] = []
    remove = hub.on("run.delta", heard.append)
    assert hub.wants("run.delta", "run-1")
    remove()
    hub.emit(delta("Hel"))
    assert heard == []
    assert not hub.wants("run.delta", "run-1")
    with hub.watching("run-1") as queue:
        assert hub.wants("run.delta", "run-1")
        assert not hub.wants("run.delta", "run-2")
        hub.emit(delta("lo"))
        hub.emit(delta("other", run_id="run-2"))
        assert queue.get_nowait().data["text"] == "lo"
        assert queue.empty()
    assert not hub.wants("run.delta", "run-1")


def test_the_event_json_is_flat_with_type_run_id_and_event_id() -> None:
    event = RunEvent("run.step", "run-1", 7, {"step": 0, "kind": "llm"})
    assert event.as_dict() == {"type": "run.step", "run_id": "run-1", "event_id": 7, "step": 0, "kind": "llm"}


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("", None), (" 12 ", 12)])
def test_a_last_event_id_is_read_as_an_event_id(value: str | None, expected: int | None) -> None:
    assert parse_event_id(value) == expected


@pytest.mark.parametrize(("value", "problem"), [("abc", "is not an event id"), ("-3", "is negative")])
def test_a_last_event_id_that_is_no_event_id_is_refused_by_name(value: str, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        parse_event_id(value)


def step(index: int, kind: str, calls: int = 0) -> RunEvent:
    data: dict[str, object] = {"step": index, "kind": kind}
    if kind == "llm":
        data["tool_calls"] = [{"name": "add"}] * calls
    return RunEvent("run.step", "run-1", 10 + index, data)


def test_a_delta_waits_for_the_history_events_before_its_model_call() -> None:
    order = DeltaOrder()
    first, second = (
        delta("Hel"),
        RunEvent("run.delta", "run-1", None, {"step": 1, "kind": "text", "text": "5"}),
    )

    assert order.delta(first) == []  # ahead of run.started
    assert order.seen(RunEvent("run.started", "run-1", 5)) == [first]
    assert order.seen(step(0, "llm", calls=2)) == []
    assert order.delta(second) == []  # step 1's model call came after both tool calls of step 0
    assert order.seen(step(0, "tool")) == []
    assert order.seen(step(0, "tool")) == [second]
    late = delta("lo")
    assert order.delta(late) == [late]  # once its place has come, a delta goes straight through


def step_delta(text: str, step: int, run_id: str = "run-1") -> RunEvent:
    return RunEvent("run.delta", run_id, None, {"step": step, "kind": "text", "text": text})


def test_a_stream_that_joins_while_the_model_writes_gets_the_steps_words_so_far() -> None:
    hub = EventHub()
    hub.keep_recent_deltas()
    assert hub.wants("run.delta", "run-1")  # kept even before any stream watches
    hub.emit(step_delta("old", 0))
    hub.emit(step_delta("Hel", 1))
    hub.emit(step_delta("Hel", 1, run_id="run-2"))
    with hub.watching("run-1") as queue:
        hub.emit(step_delta("lo", 1))
        joined = [queue.get_nowait().data["text"] for _ in range(queue.qsize())]
    assert joined == ["Hel", "lo"]  # step 0's words are in its run.step event, not replayed


def test_a_hub_keeps_the_deltas_of_a_bounded_number_of_runs() -> None:
    hub = EventHub()
    hub.keep_recent_deltas()
    for n in range(RECENT_RUNS + 5):
        hub.emit(step_delta("x", 0, run_id=f"run-{n}"))
    with hub.watching("run-0") as oldest, hub.watching(f"run-{RECENT_RUNS + 4}") as newest:
        assert (oldest.qsize(), newest.qsize()) == (0, 1)


def test_a_replayed_delta_of_a_step_the_stream_has_whole_adds_nothing() -> None:
    order = DeltaOrder()
    order.seen(RunEvent("run.started", "run-1", 1, {}))
    assert order.delta(step_delta("Hel", 0)) == [step_delta("Hel", 0)]
    order.seen(RunEvent("run.step", "run-1", 5, {"step": 0, "kind": "llm", "tool_calls": []}))
    assert order.delta(step_delta("lo", 0)) == [step_delta("lo", 0)]  # a backlog: the rest still comes
    order.seen(RunEvent("run.step", "run-1", 9, {"step": 1, "kind": "llm", "tool_calls": []}))
    assert order.delta(step_delta("replayed", 1)) == []  # none of step 1 went out: its event has it all
    assert order.delta(step_delta("next", 2)) == [step_delta("next", 2)]
