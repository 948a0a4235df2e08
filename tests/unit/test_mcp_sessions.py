"""The worker's MCP sessions: a server that fails to start is tried again after a growing backoff."""

from __future__ import annotations

import time

import pytest

from chamvi import App, ChamviPlugin, mcp_server
from chamvi.mcp._sessions import McpSessions


async def test_a_server_that_fails_to_start_is_started_again_only_after_a_doubling_backoff() -> None:
    sessions = McpSessions(backoff_initial=0.2, backoff_max=0.3)
    session = sessions.session(mcp_server("gone", command=["/nonexistent/mcp-server"]))
    waits = []
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for a missing program
            await session.client()
        waits.append(time.monotonic() - started)
    assert waits[0] < 0.2 and 0.2 <= waits[1] < 0.3 and 0.3 <= waits[2] < 0.5  # capped at backoff_max
    assert session.opened == 0 and not session.is_open
    await sessions.close()
    await sessions.close()  # safe to repeat


def test_one_session_per_server_and_another_for_a_server_declared_anew() -> None:
    sessions = McpSessions()
    server = mcp_server("docs", url="http://127.0.0.1:1/mcp")
    assert sessions.session(server) is sessions.session(server)
    other = mcp_server("docs", url="http://127.0.0.1:2/mcp")
    assert sessions.session(other) is not sessions.session(server)


def test_each_workers_runtime_holds_its_own_sessions_and_the_app_none() -> None:
    app = App(agents=[], mcp_servers=[mcp_server("docs", url="http://127.0.0.1:1/mcp")])
    first, second = ChamviPlugin(app, start_collections=False), ChamviPlugin(app, start_collections=False)
    assert first.runtime.mcp_sessions is not second.runtime.mcp_sessions
    assert not any(isinstance(v, McpSessions) for v in vars(app).values())
