"""The docs' "Tools from MCP servers" files (docs/guides/mcp.md), run as a reader would run them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from chamvi import App, ChamviClient, RunStatus
from tests.support.docs import python_files


async def test_the_readme_mcp_example_searches_and_saves_a_note_through_its_server(
    chamvi: ChamviClient, running_worker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = python_files("guides/mcp.md", "## Tools from MCP servers")
    assert set(files) == {"notes_server.py", "myapp.py"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)  # the example's paths are relative, as in a project folder
    spec = importlib.util.spec_from_file_location("readme_mcp_app", tmp_path / "myapp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app: App = module.app
    payload = {"text": "refund", "title": "refunds", "body": "Paid within 14 days."}
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("scribe", payload)).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    outputs = {s.tool: s.output for s in run.steps if s.kind == "tool"}
    assert outputs == {"search_notes": "no note mentions it", "save_note": "saved 'refunds'"}
    assert (tmp_path / "notes.txt").read_text() == "refunds: Paid within 14 days.\n"
