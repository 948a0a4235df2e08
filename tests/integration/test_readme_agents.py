"""The docs' main example ("Agents and tools", docs/guides/agents.md), run from the page so it cannot drift.

The block is read out of the page, loaded as the module a reader would write, and served by a worker
on the test's dev server; only its model is scripted (the example's ``local/demo`` ref answers what
the test says), so the run goes where the page says it goes: a lookup, a void that waits for a
person, the console channel asking for the approval, and the void once approved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chamvi import App, ChamviClient, RunStatus
from chamvi.providers import ScriptedModel, call, reply
from tests.conftest import RunningWorker
from tests.polling import until_status
from tests.support.docs import python_module


def readme_app(tmp_path: Path) -> App:
    app: App = python_module("guides/agents.md", "myapp.py", tmp_path).app
    return app


async def test_the_readme_main_example_looks_up_asks_a_person_and_voids_the_invoice_once(
    chamvi: ChamviClient, running_worker: RunningWorker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = readme_app(tmp_path)
    model = ScriptedModel(
        [
            call("lookup_invoice", "c1", invoice_id="INV-7"),
            call("void_invoice", "c2", invoice_id="INV-7"),
            reply("INV-7 is voided."),
        ]
    )
    app.models.register("local/demo", model)  # the example's own model ref, scripted
    async with running_worker(app):
        run_id = (await chamvi.dispatch("billing", {"invoice_id": "INV-7"}, channel="console")).run_id
        waiting = await until_status(chamvi, run_id, RunStatus.WAITING)
        assert waiting.waiting is not None and waiting.waiting.title == "Void invoice INV-7?"
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "INV-7 is voided."
    outputs = [(s.tool, s.output) for s in run.steps if s.kind == "tool"]
    assert outputs == [
        ("lookup_invoice", {"invoice_id": "INV-7", "total": 120.0, "status": "unpaid"}),
        ("void_invoice", "Voided INV-7."),
    ]
    assert [t.name for t in model.requests[0].tools] == ["lookup_invoice", "void_invoice"]
    assert (
        "[console -> console] Approval needed: tool 'void_invoice' of agent 'billing'"
        in capsys.readouterr().out
    )
