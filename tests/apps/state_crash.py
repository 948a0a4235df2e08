"""An app whose worker is killed inside a state upsert, after the write and before its result is recorded."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from chamvi import ActivityTimeouts, AgentHooks, AgentState, App, ToolCallInfo, ToolContext, define_agent
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply


class Refund(BaseModel):
    customer: str
    amount: float


def _events() -> Path:
    return Path(os.environ["CHAMVI_TEST_DIR"]) / "events.txt"


async def _linger_after_the_first_write(info: ToolCallInfo, output: Any, ctx: ToolContext) -> Any:
    """Notes when the stored item was written; the first time, hangs so the test can kill the worker."""
    if info.tool_name == "state_refunds_upsert":
        page = await ctx.state.collection("refunds").list()
        with _events().open("a") as events:
            events.write(f"upsert-written {page.items[0].updated_at.isoformat()}\n")  # type: ignore[union-attr]
        if _events().read_text().count("upsert-written") == 1:
            await asyncio.sleep(60)
    return output


models = ModelRegistry()
models.register(
    "scripted/remember",
    ScriptedModel(
        [
            call("state_refunds_upsert", key="A-1", item={"customer": "ada@example.com", "amount": 25}),
            call("state_refunds_list"),
            reply("remembered"),
        ]
    ),
)

app = App(
    agents=[
        define_agent(
            name="remember",
            model="scripted/remember",
            instructions="Remember the refund.",
            state=AgentState(collections={"refunds": Refund}),
            hooks=AgentHooks(after_tool_execution=_linger_after_the_first_write),
        )
    ],
    models=models,
    timeouts=ActivityTimeouts(tool_heartbeat=timedelta(seconds=2)),
)
