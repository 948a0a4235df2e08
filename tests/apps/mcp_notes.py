"""An app whose effect tool lives on an MCP server (stdio), for the test that kills its worker.

The server saves the note, then hangs until its worker is gone (``MCP_HANG_AFTER_SAVE``): the
effect happened and no result was reported. ``already_applied`` asks the notes, as an app would ask
the system behind a real server whether the call it lost went through.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

from chamvi import ActivityTimeouts, App, EffectSpec, define_agent, mcp_server, mcp_tools
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(os.environ["CHAMVI_TEST_DIR"])


def _saved(key: str, args: object) -> str | None:
    notes = HERE / "notes.txt"
    title = getattr(args, "title", None)
    return "saved (found after a crash)" if notes.exists() and f"{title}:" in notes.read_text() else None


notes = mcp_server(
    "notes",
    command=[sys.executable, "-m", "tests.support.mcp_server"],
    env={"MCP_TEST_DIR": str(HERE), "MCP_HANG_AFTER_SAVE": "1", "PYTHONPATH": str(ROOT)},
    tools=["add_note"],
    effects={
        "add_note": EffectSpec(
            effect_key=lambda args, ctx: f"{ctx.run.run_id}:note:{args.title}", already_applied=_saved
        )
    },
)

models = ModelRegistry()
models.register(
    "scripted/notes",
    ScriptedModel([call("add_note", title="refund-42", body="refund approved"), reply("noted")]),
)

app = App(
    agents=[
        define_agent(
            name="notes", model="scripted/notes", instructions="Take notes.", tools=mcp_tools("notes")
        )
    ],
    models=models,
    mcp_servers=[notes],
    timeouts=ActivityTimeouts(tool_heartbeat=timedelta(seconds=2)),
)
