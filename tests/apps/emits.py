"""An app whose tool emits, then hangs, so a test can kill the worker between the emit and the call's end.

Files under CHAMVI_TEST_DIR record what ran: ``outbox.txt`` every message the channel delivered,
``events.txt`` every time the tool got past its emit, and when the channel started and stopped.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from chamvi import ActivityTimeouts, App, ChannelContext, ToolContext, define_agent, tool
from chamvi.channels import ChannelMessage
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.apps.crash import drain_me  # takes a moment: a graceful shutdown lets it finish


def here() -> Path:
    return Path(os.environ["CHAMVI_TEST_DIR"])


def _note(name: str, line: str) -> None:
    with (here() / name).open("a") as file:
        file.write(line + "\n")


class Outbox:
    """A channel that delivers by appending a line to a file: what was sent survives the worker."""

    name = "outbox"
    default_address = "team"
    untrusted = False

    async def start(self, ctx: ChannelContext) -> None:
        _note("events.txt", "channel-started")

    async def stop(self) -> None:
        _note("events.txt", "channel-stopped")

    async def out(self, message: ChannelMessage) -> None:
        _note("outbox.txt", f"{message.address} {message.key} {message.body}")


@tool
async def announce(text: str, ctx: ToolContext) -> str:
    """Announces, then hangs on its first attempt: the worker is killed before the call returns."""
    await ctx.channels.find_one_or_fail("outbox").emit(text)
    _note("events.txt", "emitted")
    if (here() / "events.txt").read_text().count("emitted") == 1:
        await asyncio.sleep(60)
    return "announced"


models = ModelRegistry()
models.register(
    "scripted/announcer", ScriptedModel([call("announce", text="Release 1.2 is out"), reply("done")])
)

models.register("scripted/lingerer", ScriptedModel([call("drain_me"), reply("done")]))

app = App(
    agents=[
        define_agent(
            name="announcer", model="scripted/announcer", instructions="Announce.", tools=[announce]
        ),
        define_agent(name="lingerer", model="scripted/lingerer", instructions="Linger.", tools=[drain_me]),
    ],
    models=models,
    channels=[Outbox()],
    timeouts=ActivityTimeouts(tool_heartbeat=timedelta(seconds=2)),
)
