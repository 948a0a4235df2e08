"""docs/guides/runtime-agents.md: its app and agent file, put and run as a reader would."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus
from tests.conftest import RunningWorker
from tests.support.cli import cli_on
from tests.support.docs import blocks, python_module

PAGE = "guides/runtime-agents.md"


def readme_yaml(name: str) -> str:
    files = {b.body.partition("\n")[0][2:].strip(): b.body for b in blocks(PAGE, lang="yaml")}
    return files[name]


async def test_the_readme_runtime_agent_is_put_and_runs_on_the_readme_app(
    client: Client, task_queue: str, chamvi: ChamviClient, running_worker: RunningWorker, tmp_path: Path
) -> None:
    app: App = python_module(PAGE, "myapp.py", tmp_path).app
    (tmp_path / "triage.yaml").write_text(readme_yaml("triage.yaml"))
    cli = cli_on(client, task_queue)
    async with running_worker(app):
        put = await cli("agents", "put", str(tmp_path / "triage.yaml"))
        run = await chamvi.wait((await chamvi.dispatch("triage", {"order_id": "A-1001"})).run_id)
        listed = await cli("agents", "list")
    assert put.stdout.strip() == "created agent triage at revision 1", put.output
    assert (run.status, run.agent_revision) == (RunStatus.COMPLETED, 1)
    assert [s.tool for s in run.steps if s.kind == "tool"] == ["lookup_order"]
    assert [line.split()[:3] for line in listed.stdout.splitlines()[1:]] == [
        ["support", "code", "-"],
        ["triage", "runtime", "1"],
    ]
