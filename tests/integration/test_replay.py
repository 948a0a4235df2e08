"""Saved histories of every workflow replay without non-determinism.

A change to workflows/ that would break runs already in flight fails here. After a deliberate,
compatible change, re-record with ``python -m tests.histories.record``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chamvi.workflows import WORKFLOWS
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def test_there_is_a_saved_history_of_each_workflow() -> None:
    saved = " ".join(path.read_text() for path in HISTORIES)
    missing = [w.__temporal_workflow_definition.name for w in WORKFLOWS]
    assert [name for name in missing if f'"{name}"' not in saved] == []


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_saved_history_replays_deterministically(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
