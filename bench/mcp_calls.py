"""An MCP tool call through a run against the same call made directly with the ``mcp`` SDK.

Starts its own Temporal dev server and a worker serving an agent whose scripted model calls the tool
``lookup`` of a stdio MCP server (``tests/support/mcp_server.py``, written with the official SDK)
``CALLS`` times, then answers. Printed, each a median in ms:

- **direct, open session**: ``Client(...).call_tool("lookup", ...)`` on one open SDK session, the
  least a call can cost;
- **direct, a session per call**: a new SDK session (a new server process) for each call, what each
  call through a run paid before sessions were kept per worker;
- **through a run**: each ``chamvi.call_tool`` activity from the worker taking it to its result
  reaching the server (history timestamps: started to closed), the tool runner, the worker's session
  of the server and Temporal's completion included, its scheduling left out;
- **a bare activity**: ``bench.noop`` in a plain temporalio worker, started to closed, the least
  any activity costs on this server;
- the ratio of the run's call, less the bare activity, to the direct call on an open session: the
  MCP part of a call through a run, whose target is at most 1.3x (the whole call's ratio is printed
  too: on a loaded 2-core machine an activity's own round trip is a few ms, the direct call ~1 ms);
- **the MCP call inside the activity**: ``chamvi.mcp._client.call_tool`` timed in the worker, from
  the tool runner handing it the arguments to the result as history keeps it (the worker's session,
  the timeout, the heartbeat detail and the result's conversion): the MCP part measured directly,
  which a loaded machine's scheduling noise in the two activity timings does not blur;
- **the SDK's call inside the activity**: ``mcp.Client.call_tool`` itself, timed in the same calls:
  the protocol round trip as a busy worker process gets it (its event loop shares the GIL with the
  workflow threads and the SDK core's callbacks), which chamvi's call wraps;
- **chamvi's session, outside a worker**: the same ``call_tool`` on a worker's ``McpSessions`` in
  this process's idle event loop: chamvi's own cost over the SDK's, with no worker beside it.

Usage: ``python bench/mcp_calls.py`` (about half a minute), ``--quick`` for a smoke run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory
from types import SimpleNamespace
from typing import Any, cast

from _common import BareChainWorkflow, BareInput, activity_timings, leave, noop, ratio, table
from _server import dev_server, machine, options, temporal_path
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from temporalio.worker import Worker

import chamvi.mcp._client as mcp_client
from chamvi import App, ChamviClient, define_agent, mcp_server, mcp_tools
from chamvi._constants import ACTIVITY_CALL_TOOL
from chamvi._lifecycle import memory_index
from chamvi.agents import Budget
from chamvi.mcp._sessions import McpSessions
from chamvi.models import RunStatus
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from chamvi.tools import ToolContext

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "tests.support.mcp_server"]


def server_env(folder: Path) -> dict[str, str]:
    return {"MCP_TEST_DIR": str(folder), "PYTHONPATH": str(ROOT)}


async def direct(folder: Path, calls: int) -> float:
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=server_env(folder))
    took = []
    async with Client(params, cache=None) as client:
        await client.call_tool("lookup", {"topic": "warm-up"})
        for i in range(calls):
            started = time.perf_counter()
            await client.call_tool("lookup", {"topic": f"t{i}"})
            took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


async def own_session(folder: Path, calls: int) -> float:
    sessions = McpSessions()
    server = mcp_server("handbook", command=SERVER, env=server_env(folder))
    ctx = cast(ToolContext, SimpleNamespace(effect_key=None, artifacts=None))  # a text result needs neither
    took = []
    try:
        await mcp_client.call_tool(server, "lookup", {"topic": "warm-up"}, sessions, ctx)
        for i in range(calls):
            started = time.perf_counter()
            await mcp_client.call_tool(server, "lookup", {"topic": f"t{i}"}, sessions, ctx)
            took.append((time.perf_counter() - started) * 1000)
    finally:
        await sessions.close()
    return statistics.median(took)


async def fresh(folder: Path, calls: int) -> float:
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=server_env(folder))
    took = []
    for i in range(calls):
        started = time.perf_counter()
        async with Client(params, cache=None) as client:
            await client.call_tool("lookup", {"topic": f"t{i}"})
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def _timed(owner: Any, name: str, took: list[float]) -> None:
    """Times each call of ``owner.name`` (an async function) from now on, in ms, into ``took``."""
    original = getattr(owner, name)

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            took.append((time.perf_counter() - started) * 1000)

    setattr(owner, name, timed)


async def through_a_run(folder: Path, calls: int) -> tuple[float, float, float, float]:
    model = ScriptedModel([*(call("lookup", topic=f"t{i}") for i in range(calls)), reply("done")])
    models = ModelRegistry()
    models.register("scripted/mcp", model)
    server = mcp_server("handbook", command=SERVER, env=server_env(folder))
    agent = define_agent(
        name="mcp",
        model="scripted/mcp",
        instructions="Look it up.",
        tools=[*mcp_tools("handbook")],
        budget=Budget(max_steps=calls + 5),
    )
    app = App(agents=[agent], models=models, mcp_servers=[server])
    inside: list[float] = []
    sdk: list[float] = []
    _timed(mcp_client, "call_tool", inside)
    _timed(Client, "call_tool", sdk)
    async with dev_server(temporal_path()) as client:
        task_queue = f"bench-mcp-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, app, task_queue=task_queue, index=memory_index()):
            chamvi = ChamviClient(client, task_queue=task_queue)
            run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
            assert run.status == RunStatus.COMPLETED, run.error
            history = await client.get_workflow_handle(run.run_id).fetch_history()
        bare_queue = f"bench-bare-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=bare_queue, workflows=[BareChainWorkflow], activities=[noop]):
            handle = await client.start_workflow(
                BareChainWorkflow.run, BareInput(activities=calls), id=bare_queue, task_queue=bare_queue
            )
            await handle.result()
            bare_history = await handle.fetch_history()
    timings = [t for t in activity_timings(history.events) if t.name == ACTIVITY_CALL_TOOL]
    in_run = statistics.median(t.closed - t.started for t in timings[1:])  # the first opens the session
    bare = statistics.median(t.closed - t.started for t in activity_timings(bare_history.events))
    return in_run, bare, statistics.median(inside[1:]), statistics.median(sdk[1:])


async def main(calls: int) -> None:
    print(f"mcp: {calls} calls of a stdio MCP server's tool, each way")
    print(f"machine: {machine()}")
    with TemporaryDirectory() as folder:
        open_session = await direct(Path(folder), calls)
        own = await own_session(Path(folder), calls)
        per_call = await fresh(Path(folder), max(3, calls // 5))
        in_run, bare, inside, sdk = await through_a_run(Path(folder), calls)
    mcp_part = max(in_run - bare, 0.0)
    print(
        table(
            ["call", "median ms", "vs open session"],
            [
                ["direct, open session", open_session, ratio(open_session, open_session)],
                ["chamvi's session, outside a worker", own, ratio(own, open_session)],
                ["direct, a session per call", per_call, ratio(per_call, open_session)],
                ["through a run (chamvi.call_tool)", in_run, ratio(in_run, open_session)],
                ["a bare activity (bench.noop)", bare, ratio(bare, open_session)],
                ["the run's call less a bare activity", mcp_part, ratio(mcp_part, open_session)],
                ["the MCP call inside the activity", inside, ratio(inside, open_session)],
                ["the SDK's call inside the activity", sdk, ratio(sdk, open_session)],
            ],
        )
    )
    verdict = "within" if mcp_part <= 1.3 * open_session else "over"
    print(
        f"the MCP part of a call through a run: {ratio(mcp_part, open_session)} the direct call, {verdict} "
        f"the 1.3x target; a session per call costs {ratio(per_call, in_run)} a call through a run"
    )
    verdict = "within" if inside <= 1.3 * sdk else "over"
    print(
        f"the MCP call inside the activity: {ratio(inside, sdk)} the SDK's own call in the same place, "
        f"{verdict} 1.3x; chamvi's session outside a worker: {ratio(own, open_session)} the direct call"
    )


if __name__ == "__main__":
    arguments = options(__doc__, "a few calls").parse_args()
    asyncio.run(main(5 if arguments.quick else 40))
    leave()
