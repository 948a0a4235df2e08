"""Saved histories of every workflow replay without non-determinism.

A change to workflows/ that would break runs already in flight fails here. After a deliberate,
compatible change, re-record with ``python -m tests.histories.record``. Each history replays through
``ChamviPlugin``'s own sandbox, with its runtime tunings off (the library's default) and on (``chamvi
worker``'s): the tunings must change no command.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chamvi.workflows import WORKFLOWS
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from chamvi import App, ChamviPlugin
from chamvi._lifecycle import memory_index

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def test_there_is_a_saved_history_of_each_workflow() -> None:
    saved = " ".join(path.read_text() for path in HISTORIES)
    missing = [w.__temporal_workflow_definition.name for w in WORKFLOWS]
    assert [name for name in missing if f'"{name}"' not in saved] == []


@pytest.mark.parametrize("tunings", [False, True], ids=["tunings-off", "tunings-on"])
@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_saved_history_replays_deterministically(path: Path, tunings: bool) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    plugin = ChamviPlugin(App(agents=[]), index=memory_index(), runtime_tunings=tunings)
    replayer = Replayer(workflows=[], plugins=[plugin])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
