"""Tools from real MCP servers (tests/support/mcp_server.py), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import RetryPolicy

from chamvi import (
    ActivityTimeouts,
    AgentTrust,
    App,
    Budget,
    ChamviClient,
    RetryPolicies,
    RunStatus,
    RunView,
    Trust,
    define_agent,
    mcp_server,
    mcp_tools,
    tool,
)
from chamvi.cli import cli
from chamvi.mcp import McpServer
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, call, reply
from chamvi.providers.scripted import ScriptedTurn
from tests.polling import eventually, until_status

ROOT = Path(__file__).resolve().parents[2]
LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"title": "Topic", "type": "string"},
        "limit": {"default": 3, "title": "Limit", "type": "integer"},
    },
    "required": ["topic"],
    "title": "lookupArguments",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HttpServer:
    """The test server as its own process on a loopback port, so a test can kill it for real."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp_server", "http", str(self.port)],
            cwd=ROOT,
            env={**os.environ, "MCP_TEST_DIR": str(self.folder)},
            stdout=subprocess.DEVNULL,
            stderr=(self.folder / "http-server.log").open("ab"),
        )

        async def accepting() -> bool | None:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return None
            writer.close()
            return True

        await eventually(accepting, f"the MCP test server on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()


@pytest.fixture
async def http_server(tmp_path: Path) -> AsyncIterator[HttpServer]:
    server = HttpServer(tmp_path)
    await server.start()
    yield server
    server.stop()


def stdio_server(folder: Path, name: str = "handbook", **options: object) -> McpServer:
    return mcp_server(
        name,
        command=[sys.executable, "-m", "tests.support.mcp_server"],
        env={"MCP_TEST_DIR": str(folder), "PYTHONPATH": str(ROOT)},
        **options,  # type: ignore[arg-type]
    )


def one_agent_app(
    server: McpServer, model: ScriptedModel, retry: RetryPolicies | None = None, **options: object
) -> App:
    models = ModelRegistry()
    models.register("scripted/mcp", model)
    return App(
        agents=[
            define_agent(
                name="mcp",
                model="scripted/mcp",
                instructions="Use the handbook.",
                tools=[*mcp_tools(server.name)],
                **options,  # type: ignore[arg-type]
            )
        ],
        models=models,
        mcp_servers=[server],
        retry=retry,
    )


async def _scheduled_activities(client: Client, run_id: str) -> list[str]:
    history = await client.get_workflow_handle(run_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_run_lists_an_mcp_servers_tools_and_calls_one_as_its_own_activity(
    transport: str, chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    http = HttpServer(tmp_path)
    if transport == "http":
        await http.start()
        server = mcp_server("handbook", url=http.url, headers={"Authorization": "Bearer test"})
    else:
        server = stdio_server(tmp_path)
    model = ScriptedModel([call("lookup", topic="refunds"), reply("Refunds take 3 days.")])
    try:
        async with running_worker(one_agent_app(server, model)):
            run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    finally:
        http.stop()
    assert run.status == RunStatus.COMPLETED, run.error
    step = next(s for s in run.steps if s.kind == "tool")
    assert (step.tool, step.output, step.error) == ("lookup", "3 facts about refunds", None)
    offered = {t.name: t for t in model.requests[0].tools}
    assert set(offered) == {"lookup", "add_note", "fetch_page", "crash", "hang", "refuse", "pid", "learn"}
    assert offered["lookup"].parameters == LOOKUP_SCHEMA  # the server's schema, as it wrote it
    assert offered["lookup"].description == "Looks a topic up in the handbook."
    seen = "Bearer test" if transport == "http" else None  # stdio has no headers
    assert f"lookup authorization={seen}" in (tmp_path / "events.txt").read_text()
    scheduled = await _scheduled_activities(chamvi.client, run.run_id)
    assert scheduled == [
        "chamvi.list_mcp_tools",
        "chamvi.call_model",
        "chamvi.call_tool",
        "chamvi.call_model",
    ]


async def test_an_error_result_of_an_mcp_tool_is_a_tool_error_the_model_reads(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    model = ScriptedModel([call("refuse", reason="no such invoice"), reply("It failed.")])
    async with running_worker(one_agent_app(stdio_server(tmp_path), model)):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.COMPLETED
    error = next(s for s in run.steps if s.kind == "tool").error
    assert error is not None and error.code == "mcp_tool_error"
    assert "no such invoice" in error.message
    tool_message = model.requests[1].messages[-1]
    assert tool_message.is_error and "mcp_tool_error" in (tool_message.content or "")


async def test_an_http_mcp_server_killed_mid_call_is_a_tool_error_and_the_worker_keeps_serving(
    chamvi: ChamviClient, running_worker, http_server: HttpServer
) -> None:
    server = mcp_server("handbook", url=http_server.url)
    model = ScriptedModel([call("crash"), call("lookup", topic="refunds"), reply("The handbook is down.")])
    app = one_agent_app(server, model)
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
        assert run.status == RunStatus.COMPLETED, run.error
        crashed, down = (s.error for s in run.steps if s.kind == "tool")
        assert crashed is not None and crashed.code == "mcp_server_unavailable"
        assert "'handbook'" in crashed.message and "'crash'" in crashed.message
        assert down is not None and down.code == "mcp_server_unavailable"
        assert http_server.url in down.message

        http_server.stop()
        await http_server.start()  # back on the same port: the same worker reaches it again
        model.turns[:] = [call("lookup", topic="returns"), reply("Back.")]
        model.requests.clear()
        again = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert again.status == RunStatus.COMPLETED
    assert next(s for s in again.steps if s.kind == "tool").output == "3 facts about returns"


async def test_a_stdio_mcp_server_killed_mid_call_is_a_tool_error_and_the_next_call_starts_it_again(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    model = ScriptedModel([call("crash"), call("lookup", topic="refunds"), reply("Recovered.")])
    async with running_worker(one_agent_app(stdio_server(tmp_path), model)):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    crashed, looked_up = (s for s in run.steps if s.kind == "tool")
    assert crashed.error is not None and crashed.error.code == "mcp_server_unavailable"
    assert (tmp_path / "events.txt").read_text().count("crash-started") == 1
    assert looked_up.error is None and looked_up.output == "3 facts about refunds"


async def _attempts_of_tool_calls(client: Client, run_id: str) -> list[int]:
    # the tool calls only: on a loaded machine the listing of the server's tools (bounded by the same
    # 3 s timeout) may take a second attempt, which says nothing of the hung call
    history = await client.get_workflow_handle(run_id).fetch_history()
    tool_calls = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "chamvi.call_tool"
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in tool_calls
    ]


@pytest.mark.parametrize(
    ("transport", "bound"),
    [("stdio", "server"), ("http", "server"), ("stdio", "tool-timeout")],
)
async def test_a_hung_mcp_server_is_a_tool_error_naming_it_within_one_timeout_and_never_retried(
    transport: str, bound: str, chamvi: ChamviClient, running_worker, client: Client, tmp_path: Path
) -> None:
    timeout = timedelta(seconds=3) if bound == "server" else None
    http = HttpServer(tmp_path)
    if transport == "http":
        await http.start()
        server = mcp_server("handbook", url=http.url, timeout=timeout)
    else:
        server = stdio_server(tmp_path, timeout=timeout)
    model = ScriptedModel([call("hang"), call("lookup", topic="refunds"), reply("The handbook hangs.")])
    app = one_agent_app(server, model)
    if bound == "tool-timeout":
        # a heartbeat timeout a loaded machine keeps: a missed heartbeat would retry the call (hang twice)
        app.timeouts = ActivityTimeouts(tool=timedelta(seconds=12), tool_heartbeat=timedelta(seconds=8))
    try:
        async with running_worker(app):
            run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    finally:
        http.stop()
    assert run.status == RunStatus.COMPLETED, run.error
    hung, looked_up = (s for s in run.steps if s.kind == "tool")
    assert hung.error is not None and hung.error.code == "mcp_server_unavailable"
    assert "MCP server 'handbook'" in hung.error.message and "the call to 'hang'" in hung.error.message
    expected = "within 3 s (the server's timeout)" if bound == "server" else "s (the tool timeout)"
    assert expected in hung.error.message
    assert looked_up.output == "3 facts about refunds"  # the run went on
    assert (tmp_path / "events.txt").read_text().count("hang-started") == 1
    assert set(await _attempts_of_tool_calls(client, run.run_id)) == {1}  # no attempt was retried


async def test_runs_show_names_a_call_in_progress_and_its_attempt(
    chamvi: ChamviClient, running_worker, client: Client, task_queue: str, tmp_path: Path
) -> None:
    server = stdio_server(tmp_path, timeout=timedelta(seconds=60))
    model = ScriptedModel([call("hang"), reply("done")])
    async with running_worker(one_agent_app(server, model)):
        run_id = (await chamvi.dispatch("mcp")).run_id

        async def calling() -> RunView | None:
            view = await chamvi.get_run(run_id)
            # the run's listing of the server's tools is a call too, before the tool's
            calls = [c for c in view.calls if c.activity == "chamvi.call_tool" and c.doing]
            return view.model_copy(update={"calls": calls}) if calls else None

        view = await eventually(calling, "a heartbeat naming the call")
        argv = ["runs", "show", run_id, "--address", client.service_client.config.target_host]
        argv += ["--namespace", client.namespace, "--task-queue", task_queue]
        shown = await asyncio.to_thread(CliRunner().invoke, cli, argv)
        await chamvi.cancel(run_id)
    (call_view,) = view.calls
    assert call_view.activity == "chamvi.call_tool" and call_view.attempt == 1
    assert call_view.maximum_attempts == 10
    assert call_view.doing == "tool 'hang' of MCP server 'handbook'"
    assert shown.exit_code == 0, shown.output
    assert "calling   tool 'hang' of MCP server 'handbook' (chamvi.call_tool, attempt 1 of 10" in shown.output


async def test_after_taint_an_unclassified_servers_tool_runs_and_a_classified_ones_needs_approval(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    web = stdio_server(tmp_path, "web", tools=["fetch_page"], trust=Trust(taint=True))
    notes = stdio_server(tmp_path, "notes", tools=["add_note"])
    guarded = stdio_server(
        tmp_path, "guarded-notes", tools=["add_note"], trust=Trust(guard_when_tainted=True)
    )
    turns = [
        call("fetch_page", url="https://example.com"),
        call("add_note", title="t", body="from the page"),
        reply("done"),
    ]
    models = ModelRegistry()
    models.register("scripted/open", ScriptedModel(turns))
    models.register("scripted/guarded", ScriptedModel(turns))
    app = App(
        agents=[
            define_agent(
                name="open",
                model="scripted/open",
                instructions="Read.",
                tools=[*mcp_tools("web"), *mcp_tools("notes")],
            ),
            define_agent(
                name="guarded",
                model="scripted/guarded",
                instructions="Read.",
                tools=[*mcp_tools("web"), *mcp_tools("guarded-notes")],
            ),
        ],
        models=models,
        mcp_servers=[web, notes, guarded],
    )
    async with running_worker(app):
        open_run = await chamvi.wait((await chamvi.dispatch("open")).run_id)
        assert open_run.status == RunStatus.COMPLETED
        assert open_run.taint is not None and open_run.taint.source == "tool:fetch_page"
        assert [s.error for s in open_run.steps if s.kind == "tool"] == [None, None]
        assert (tmp_path / "notes.txt").read_text().count("t: from the page") == 1
        assert "note-saved effect-key=None" in (tmp_path / "events.txt").read_text()  # no effect tool

        guarded_id = (await chamvi.dispatch("guarded")).run_id
        waiting = await until_status(chamvi, guarded_id, RunStatus.WAITING)
        assert waiting.waiting is not None and waiting.waiting.tool == "add_note"
        assert "untrusted" in waiting.waiting.title
        await chamvi.approvals.approve(guarded_id, approved=False, reason="not today")
        guarded_run = await chamvi.wait(guarded_id)
    assert guarded_run.status == RunStatus.COMPLETED
    denied = [s.error for s in guarded_run.steps if s.kind == "tool"][-1]
    assert denied is not None and denied.code == "tool_denied" and "not today" in denied.message
    assert (tmp_path / "notes.txt").read_text().count("t: from the page") == 1


async def test_a_tool_policy_covers_mcp_tools_as_it_covers_the_agents_own(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    model = ScriptedModel([call("add_note", title="t", body="b"), reply("done")])
    app = one_agent_app(stdio_server(tmp_path), model, tool_policy=lambda tool, run: tool != "add_note")
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert "add_note" not in {t.name for t in model.requests[0].tools}
    error = next(s for s in run.steps if s.kind == "tool").error
    assert error is not None and error.code == "tool_not_allowed"
    assert not (tmp_path / "notes.txt").exists()


async def test_a_run_whose_mcp_server_is_down_fails_naming_it_once_the_tool_retries_are_spent(
    chamvi: ChamviClient, running_worker
) -> None:
    down = mcp_server("handbook", url=f"http://127.0.0.1:{_free_port()}/mcp")
    retry = RetryPolicies(tool=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=2))
    app = one_agent_app(down, ScriptedModel([reply("never asked")]), retry)
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "mcp_server_unavailable"
    assert "'handbook'" in run.error.message and down.url in run.error.message  # type: ignore[operator]


async def test_an_mcp_tool_named_like_one_of_the_agents_own_tools_fails_the_run_naming_both(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    @tool
    def lookup(topic: str) -> str:
        """Looks a topic up locally."""
        return topic

    models = ModelRegistry()
    models.register("scripted/mcp", ScriptedModel([reply("never asked")]))
    server = stdio_server(tmp_path, tools=["lookup"])
    app = App(
        agents=[
            define_agent(
                name="mcp", model="scripted/mcp", instructions="x", tools=[lookup, *mcp_tools("handbook")]
            )
        ],
        models=models,
        mcp_servers=[server],
    )
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "invalid_agent_definition"
    assert "'lookup'" in run.error.message and "'handbook'" in run.error.message


async def test_a_tool_named_in_tools_that_the_server_does_not_list_fails_the_run_naming_what_it_lists(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    server = stdio_server(tmp_path, tools=["lookup", "delete_everything"])
    async with running_worker(one_agent_app(server, ScriptedModel([reply("never asked")]))):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "invalid_agent_definition"
    assert "lists no tool 'delete_everything'" in run.error.message
    assert "'lookup'" in run.error.message


def _classifying_app(folder: Path, trust: AgentTrust, turns: list[ScriptedTurn]) -> App:
    models = ModelRegistry()
    models.register("scripted/mcp", ScriptedModel(turns))
    web, notes = stdio_server(folder, "web", tools=["fetch_page"]), stdio_server(folder, tools=["add_note"])
    agent = define_agent(
        name="mcp",
        model="scripted/mcp",
        instructions="Read.",
        tools=[*mcp_tools("web"), *mcp_tools("handbook")],
        trust=trust,
    )
    return App(agents=[agent], models=models, mcp_servers=[web, notes])


async def test_an_agents_trust_classifies_mcp_tools_by_name_and_can_refuse_them_once_tainted(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    trust = AgentTrust(
        on_tainted="deny",
        tools={"fetch_page": Trust(taint=True), "add_note": Trust(guard_when_tainted=True)},
    )
    turns = [
        call("fetch_page", url="https://example.com"),
        call("add_note", title="t", body="b"),
        reply("ok"),
    ]
    async with running_worker(_classifying_app(tmp_path, trust, turns)):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.COMPLETED
    assert run.taint is not None and run.taint.source == "tool:fetch_page"
    denied = [s.error for s in run.steps if s.kind == "tool"][-1]
    assert denied is not None and denied.code == "tool_denied"
    assert not (tmp_path / "notes.txt").exists()


async def test_an_agents_trust_naming_a_tool_no_mcp_server_lists_fails_the_run_naming_it(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    trust = AgentTrust(tools={"fetch_pages": Trust(taint=True)})
    async with running_worker(_classifying_app(tmp_path, trust, [reply("never asked")])):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "invalid_agent_definition"
    assert "'fetch_pages'" in run.error.message and "'fetch_page'" in run.error.message


def _starts(folder: Path) -> int:
    return (folder / "events.txt").read_text().count("server-started")


async def test_twenty_calls_in_one_run_and_a_second_run_share_one_stdio_server_process(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    turns = [call("lookup", topic=f"t{i}") for i in range(20)]
    model = ScriptedModel([*turns, reply("done")])
    async with running_worker(one_agent_app(stdio_server(tmp_path), model, budget=Budget(max_steps=30))):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
        assert run.status == RunStatus.COMPLETED, run.error
        assert [s.output for s in run.steps if s.kind == "tool"] == [f"3 facts about t{i}" for i in range(20)]
        model.turns[:] = [call("lookup", topic="again"), reply("done")]
        again = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
        assert again.status == RunStatus.COMPLETED, again.error
    assert _starts(tmp_path) == 1  # listings and calls of both runs went through one session


async def test_a_server_killed_between_two_calls_is_started_again_and_the_run_goes_on(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    async def kill_it(request: ChatRequest) -> ScriptedTurn:
        server_pid = int(request.messages[-1].content or "0")
        os.kill(server_pid, signal.SIGKILL)
        await asyncio.sleep(0.5)  # the worker sees its stdout close
        return call("lookup", topic="refunds")

    model = ScriptedModel([call("pid"), kill_it, call("pid"), reply("done")])
    async with running_worker(one_agent_app(stdio_server(tmp_path), model)):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    first, looked_up, second = (s for s in run.steps if s.kind == "tool")
    assert looked_up.error is None and looked_up.output == "3 facts about refunds"
    assert first.output != second.output  # another process
    assert _starts(tmp_path) == 2


async def test_a_servers_tools_changed_notification_refreshes_the_listing_the_next_run_gets(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    model = ScriptedModel([call("learn", topic="refunds"), reply("learned")])
    async with running_worker(one_agent_app(stdio_server(tmp_path), model)):
        first = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
        assert first.status == RunStatus.COMPLETED, first.error
        assert "recall_refunds" not in {t.name for t in model.requests[0].tools}
        model.turns[:] = [call("recall_refunds"), reply("done")]
        model.requests.clear()
        second = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    assert second.status == RunStatus.COMPLETED, second.error
    assert "recall_refunds" in {t.name for t in model.requests[0].tools}
    assert next(s for s in second.steps if s.kind == "tool").output == "remembered refunds"
    assert _starts(tmp_path) == 1


async def test_a_stopped_worker_ends_its_stdio_servers(
    chamvi: ChamviClient, running_worker, tmp_path: Path
) -> None:
    model = ScriptedModel([call("pid"), reply("done")])
    async with running_worker(one_agent_app(stdio_server(tmp_path), model)):
        run = await chamvi.wait((await chamvi.dispatch("mcp")).run_id)
    server_pid = next(s for s in run.steps if s.kind == "tool").output

    async def gone() -> bool | None:
        try:
            os.kill(int(server_pid), 0)
        except ProcessLookupError:
            return True
        return None

    await eventually(gone, "the stdio server's process to end with the worker")
