"""The docs' "Agent state" file (docs/guides/state.md), run as a reader would run it."""

from __future__ import annotations

from pathlib import Path

from chamvi import App, ChamviClient, RunStatus
from tests.support.docs import python_module


async def test_the_readme_state_example_counts_loops_and_remembers_who_counted(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    app: App = python_module("guides/state.md", "digest.py", tmp_path).app
    async with running_worker(app):
        first = await chamvi.wait((await chamvi.dispatch("digest")).run_id)
        second = await chamvi.wait((await chamvi.dispatch("digest")).run_id)
        overview = await chamvi.state.list("digest")
    assert first.status == second.status == RunStatus.COMPLETED, first.error
    outputs = {s.tool: s.output for s in second.steps if s.kind == "tool"}
    # the demo model calls every tool without required arguments: the count and the generated list
    assert outputs == {"count_loops": 0, "state_loops_list": {"items": [], "next_offset": None}}
    assert overview.collections == {"loops": 0}
    assert [(i.key, i.value) for i in overview.page.items] == [("last_count_by", second.run_id)]
