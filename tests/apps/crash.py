"""An app for tests that kill or stop worker processes; files under CHAMVI_TEST_DIR record what ran."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from chamvi import ActivityTimeouts, App, ToolContext, define_agent, effect_marker, effect_tool, tool
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply


def here() -> Path:
    return Path(os.environ["CHAMVI_TEST_DIR"])


def _note(name: str, line: str) -> None:
    with (here() / name).open("a") as file:
        file.write(line + "\n")


def _found_in_ledger(key: str, _args: object) -> str | None:
    ledger = here() / "ledger.txt"
    return (
        "charged (found after a crash)"
        if ledger.exists() and effect_marker(key) in ledger.read_text()
        else None
    )


@effect_tool(effect_key=lambda args, ctx: f"{ctx.run.run_id}:charge", already_applied=_found_in_ledger)
async def charge(amount: int, ctx: ToolContext) -> str:
    """Charges the customer: the side effect lands, then the worker dies before reporting it."""
    _note("ledger.txt", f"{amount} {effect_marker(f'{ctx.run.run_id}:charge')}")
    _note("events.txt", "charge-applied")
    await asyncio.sleep(60)
    return "charged"


@tool
async def hang() -> str:
    """Idempotent; hangs on its first attempt so the test can kill the worker after `charge` completed."""
    _note("events.txt", "hang-started")
    if (here() / "events.txt").read_text().count("hang-started") == 1:
        await asyncio.sleep(60)
    return "done hanging"


@tool
async def drain_me() -> str:
    """Takes a moment; a graceful shutdown must let it finish."""
    _note("events.txt", "drain-started")
    await asyncio.sleep(2)
    _note("events.txt", "drain-finished")
    return "drained"


@effect_tool
async def render_report(title: str, ctx: ToolContext) -> str:
    """Puts a report; the first attempt dies after the put, before its completion is recorded."""
    artifact = await ctx.artifacts.put("text/markdown", f"# {title}\n", filename="report.md")
    _note("events.txt", f"report-put {artifact.id}")
    if (here() / "events.txt").read_text().count("report-put") == 1:
        await asyncio.sleep(60)
    return artifact.id


BULK_BYTES = 300_000_000
"""Big enough that writing it takes a while: the test kills the worker in the middle of the put."""


@tool
async def store_bulk(ctx: ToolContext) -> str:
    """Puts a big file; the first attempt's worker is killed while the bytes are being written."""
    _note("events.txt", "bulk-put-started")
    return (await ctx.artifacts.put("application/octet-stream", bytes(BULK_BYTES), filename="bulk.bin")).id


@tool
async def annotate(ctx: ToolContext) -> str:
    """Puts a note after the report: its id numbers on from the report's."""
    return (await ctx.artifacts.put("text/plain", "checked", filename="note.txt")).id


models = ModelRegistry()
models.register("scripted/crash", ScriptedModel([call("charge", amount=42), call("hang"), reply("all done")]))
models.register(
    "scripted/report", ScriptedModel([call("render_report", title="Q3"), call("annotate"), reply("filed")])
)
models.register("scripted/drain", ScriptedModel([call("drain_me"), reply("drained")]))
models.register("scripted/bulk", ScriptedModel([call("store_bulk"), reply("stored")]))

app = App(
    agents=[
        define_agent(name="crash", model="scripted/crash", instructions="Charge.", tools=[charge, hang]),
        define_agent(
            name="report", model="scripted/report", instructions="Report.", tools=[render_report, annotate]
        ),
        define_agent(name="drain", model="scripted/drain", instructions="Drain.", tools=[drain_me]),
        define_agent(name="bulk", model="scripted/bulk", instructions="Store.", tools=[store_bulk]),
    ],
    models=models,
    timeouts=ActivityTimeouts(tool_heartbeat=timedelta(seconds=2)),
)
