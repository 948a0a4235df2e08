"""The README's "Your first agent", served and dispatched as the README says, with its answer."""

from __future__ import annotations

import json
from pathlib import Path

from chamvi import App, ChamviClient, RunStatus
from tests.conftest import RunningWorker
from tests.support.docs import python_module, shell_block


async def test_the_readme_first_agent_counts_the_words_of_the_payload_it_is_dispatched_with(
    chamvi: ChamviClient, running_worker: RunningWorker, tmp_path: Path
) -> None:
    app: App = python_module("README.md", "hello.py", tmp_path).app
    command = shell_block("README.md", "chamvi dispatch counter").splitlines()[-1]
    payload = command.split("--payload '", 1)[1].split("'", 1)[0]
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("counter", json.loads(payload))).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert [(s.tool, s.output) for s in run.steps if s.kind == "tool"] == [("word_count", 4)]
