"""A Temporal server SIGKILLed under running tools: the calls are retried, never answered with its RPC errors.

Issue 34's drill (G1): 45 runs of an agent whose effect tool takes 4 seconds, its own Temporal dev
server killed three times while tools are in flight and started again over the same SQLite file, one
worker living through it all. Each effect is applied exactly once, and no run's transcript holds a
tool error: before, a ledger lookup that met the dead server became a tool error the model read, and
the run completed without its effect.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from chamvi.activities.tools import ToolActivities
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RetryConfig
from temporalio.testing import ActivityEnvironment

from chamvi import App, ChamviClient, RunStatus, ToolContext, define_agent, effect_tool, tool
from chamvi._dev import DevServer, DevServerConfig
from chamvi.app import ActivityTimeouts
from chamvi.channels import console_channel
from chamvi.errors import InfrastructureUnavailableError
from chamvi.models import ToolCall, ToolRequest, TriggerEnvelope
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.worker_state import AppRuntime

RUNS = 45
ITEMS = ("a", "b")
"""Each run charges these, one call after the other: two effects per run."""
TOOL_SECONDS = 4.0
OUTAGE_SECONDS = 12.0
"""How long the server stays down: past the Temporal client's own retries of a query (about 10 s by
default), so a call's ledger lookup fails for good rather than waiting it out."""
KILLS = 3


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Ledger:
    """The system the effect tool changes, outside Temporal: a SQLite file under the test's tmp folder."""

    path: Path

    def __post_init__(self) -> None:
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS applied (run_id TEXT, item TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS started (run_id TEXT, item TEXT)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None, timeout=30)

    def start(self, run_id: str, item: str) -> None:
        with self._db() as db:
            db.execute("INSERT INTO started VALUES (?, ?)", (run_id, item))

    def apply(self, run_id: str, item: str) -> None:
        with self._db() as db:
            db.execute("INSERT INTO applied VALUES (?, ?)", (run_id, item))

    def applied(self, run_id: str, item: str) -> bool:
        with self._db() as db:
            row = db.execute("SELECT 1 FROM applied WHERE run_id = ? AND item = ?", (run_id, item)).fetchone()
        return row is not None

    def counts(self) -> dict[tuple[str, str], int]:
        with self._db() as db:
            rows = db.execute("SELECT run_id, item, COUNT(*) FROM applied GROUP BY run_id, item").fetchall()
        return {(run_id, item): count for run_id, item, count in rows}

    def in_flight(self) -> int:
        """Calls whose body began and has not applied its effect yet."""
        with self._db() as db:
            started = db.execute("SELECT COUNT(*) FROM started").fetchone()[0]
            applied = db.execute("SELECT COUNT(*) FROM applied").fetchone()[0]
        return int(started) - int(applied)


@dataclass
class Outages:
    """Kills the drill's server when the n-th call looks up its effect, then starts it again.

    A kill is timed inside the worker, as a call is about to ask its run whether its effect is
    recorded, while other calls' bodies are under way: the moment the incident's lookups met a dead
    server. ``at`` are the lookup counts from which each kill is due (retried calls look up again).
    """

    config: DevServerConfig
    ledger: Ledger
    at: tuple[int, ...]
    server: DevServer | None = None
    armed: bool = False
    lookups: int = 0
    in_flight_at_kills: list[int] = field(default_factory=list)
    killed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self.server = DevServer(self.config)
        self.server.start()
        await self.server.wait_ready()

    def looking_up(self) -> None:
        self.lookups += 1
        kills = len(self.in_flight_at_kills)
        due = kills < len(self.at) and self.lookups >= self.at[kills]
        # armed once every run is dispatched; never twice in one outage; only under running tools
        if not due or not self.armed or self.server is None or self.killed.is_set():
            return
        in_flight = self.ledger.in_flight()
        if in_flight:
            assert self.server.pid is not None
            os.killpg(self.server.pid, signal.SIGKILL)
            self.in_flight_at_kills.append(in_flight)
            self.killed.set()

    async def restart_after_each_kill(self) -> None:
        for _ in range(KILLS):
            await self.killed.wait()
            assert self.server is not None
            self.server.stop()  # reaps the killed process, releases the data folder
            await asyncio.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for a condition
            await self.start()
            self.killed.clear()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def drill_app(ledger: Ledger, on_lookup: Callable[[], None]) -> App:
    """An agent that charges each item once, through an effect tool whose body takes 4 seconds."""

    def charge_key(arguments: Any, ctx: ToolContext) -> str:
        on_lookup()  # the tool runner looks the key up in the run's ledger next
        return f"{ctx.run.run_id}:charge:{arguments.item}"

    def already_charged(key: str, arguments: Any, ctx: ToolContext) -> str | None:
        item = arguments.item
        return f"charged {item}" if ledger.applied(ctx.run.run_id, item) else None

    @effect_tool(effect_key=charge_key, already_applied=already_charged)
    async def charge(item: str, ctx: ToolContext) -> str:
        """Charges one item (a remote call that takes 4 seconds)."""
        ledger.start(ctx.run.run_id, item)
        await asyncio.sleep(TOOL_SECONDS)
        ledger.apply(ctx.run.run_id, item)
        return f"charged {item}"

    models = ModelRegistry()
    turns = [call("charge", item=item) for item in ITEMS]
    models.register("scripted/drill", ScriptedModel([*turns, reply("all charged")]))
    return App(
        agents=[define_agent(name="drill", model="scripted/drill", instructions="Test.", tools=[charge])],
        models=models,
        # a call whose completion died with the server is tried again 10 s after its last heartbeat
        # (a tool) or 20 s after it began (the scripted model, which answers at once)
        timeouts=ActivityTimeouts(model=timedelta(seconds=20), tool_heartbeat=timedelta(seconds=10)),
    )


@asynccontextmanager
async def outages(tmp_path: Path, ledger: Ledger, at: tuple[int, ...]) -> AsyncIterator[Outages]:
    config = DevServerConfig(data=tmp_path / "temporal", port=_free_port(), ui_port=_free_port())
    drill = Outages(config, ledger, at)
    await drill.start()
    try:
        yield drill
    finally:
        drill.stop()


@pytest.mark.timeout(300)
async def test_forty_five_effect_runs_through_three_server_kills_apply_each_effect_exactly_once(
    task_queue: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    calls = RUNS * len(ITEMS)
    async with outages(tmp_path, ledger, at=(calls // 9, calls * 4 // 9, calls * 7 // 10)) as drill:
        client = await Client.connect(drill.config.address, data_converter=pydantic_data_converter)
        chamvi = ChamviClient(client, task_queue=task_queue)
        app = drill_app(ledger, drill.looking_up)
        async with build_worker(client, app, task_queue=task_queue, max_runs=RUNS):
            restarts = asyncio.ensure_future(drill.restart_after_each_kill())
            started = await asyncio.gather(*(chamvi.dispatch("drill", payload={"n": n}) for n in range(RUNS)))
            run_ids = [s.run_id for s in started]
            drill.armed = True
            await asyncio.wait_for(restarts, timeout=150)
            runs = await asyncio.wait_for(asyncio.gather(*(chamvi.wait(r) for r in run_ids)), timeout=120)

    assert len(drill.in_flight_at_kills) == KILLS
    assert all(n >= 1 for n in drill.in_flight_at_kills), drill.in_flight_at_kills  # tools were running
    errors = [(r.run_id, s.error) for r in runs for s in r.steps if s.kind == "tool" and s.error]
    assert errors == []
    assert {r.status for r in runs} == {RunStatus.COMPLETED}
    assert ledger.counts() == {(run_id, item): 1 for run_id in run_ids for item in ITEMS}


# ---- each path of a call's bookkeeping through Temporal, against a server that died ----


@pytest_asyncio.fixture(scope="module")
async def dead_server_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """A client that reached its server, which was then SIGKILLed: every call is refused at once."""
    folder = tmp_path_factory.mktemp("dead-server")
    config = DevServerConfig(data=folder / "temporal", port=_free_port(), ui_port=_free_port())
    server = DevServer(config)
    server.start()
    try:
        await server.wait_ready()
        # no retries of its own, so the refusal comes at once rather than after about 10 s
        client = await Client.connect(
            config.address, data_converter=pydantic_data_converter, retry_config=RetryConfig(max_retries=0)
        )
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGKILL)
    finally:
        server.stop()
    yield client


@effect_tool
async def refund(order_id: str) -> str:
    """Refunds an order."""
    return f"refunded {order_id}"


@tool
async def announce(text: str, ctx: ToolContext) -> str:
    """Tells the ops channel."""
    await ctx.channels.find_one_or_fail("console").emit(text, address="ops")
    return "announced"


@tool
async def delegate(ctx: ToolContext) -> str:
    """Hands the work to another run."""
    return await ctx.dispatch("clerk")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("refund", {"order_id": "A1"}), ("announce", {"text": "shipped"}), ("delegate", {})],
    ids=["effect", "emit", "dispatch"],
)
async def test_a_dead_temporal_server_fails_the_tool_activity_and_never_answers_the_model(
    dead_server_client: Client, name: str, arguments: dict[str, Any]
) -> None:
    offered = [refund, announce, delegate]
    clerk = define_agent(
        name="clerk", instructions="x", model="local/demo", tools=offered, channels=["console"]
    )
    app = App(agents=[clerk], channels=[console_channel(write=lambda _: None)])
    activities = ToolActivities(AppRuntime(app))
    activities._triggers["run-1"] = TriggerEnvelope()  # the run's first call on this worker asked already
    request = ToolRequest(
        run_id="run-1",
        agent="clerk",
        step=0,
        call=ToolCall(id="call-1", name=name, arguments=arguments),
        trigger=TriggerEnvelope(),
    )
    with pytest.raises(InfrastructureUnavailableError, match="asking the run for a recorded effect failed"):
        await ActivityEnvironment(client=dead_server_client).run(activities.call_tool, request)
