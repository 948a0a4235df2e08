"""The in-process listeners of run events (``App.on``) and reading a ``Last-Event-ID``."""

from __future__ import annotations

import pytest

from chamvi import App, RunEvent, define_agent
from chamvi.errors import InvalidInputError
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from chamvi.run_events import EventHub, parse_event_id


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
