"""One long-lived MCP session per declared server per worker, held by its runtime (``AppRuntime``).

A stdio server is started once and stays up; an HTTP server keeps one session. Listings and calls of
every run the worker serves share it (MCP multiplexes requests on a session), so a call pays no
process start or handshake. A session is opened on first use, and:

- a server that dies (its process exits, its connection closes) is a tool error for the calls in
  flight; the next call opens a new session, after a backoff that doubles from
  ``backoff_initial`` to ``backoff_max`` while opening keeps failing;
- the tool listing is cached per session, and dropped when the server says its tools changed
  (``notifications/tools/list_changed``, or the ``subscriptions/listen`` event of 2026-era
  servers), and whenever the session is opened again;
- every session is closed (a stdio server's process ends) when the worker stops: the plugin's
  lifecycle calls :meth:`McpSessions.close`.

A Temporal retry of a call runs in a new activity attempt, on this worker or another: on this
worker it uses the same session (a new one if the server died), on another worker that worker's
own. Nothing of a call lives in the session between attempts, so a server must not rely on
session state across calls (an effect tool's call carries its effect key for that).

The ``mcp`` SDK's client runs its transport in an anyio task group that must be entered and left
by one task: each session holds its client in a task of its own, and calls reach it from the
activities' tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from chamvi.mcp import McpServer

log = logging.getLogger(__name__)

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults: a server may hold a response stream open for as long as a tool runs
(the tool activity's timeout bounds the call as a whole)."""

CLOSE_TIMEOUT = 5.0
"""Seconds a session has to close before its task is cancelled (a stdio server that ignores EOF)."""


def is_disconnect(error: BaseException) -> bool:
    """Whether ``error`` means the session is gone (rather than a request the server refused)."""
    if isinstance(error, MCPError):
        return error.error.code == types.CONNECTION_CLOSED
    return not isinstance(error, TimeoutError | asyncio.CancelledError)


@asynccontextmanager
async def connect(server: McpServer, message_handler: Any = None) -> AsyncIterator[Client]:
    """A client connected to ``server`` for the block: a stdio process, or a streamable-HTTP session."""
    if server.url is not None:
        async with (
            httpx2.AsyncClient(headers=dict(server.headers), timeout=HTTP_TIMEOUT) as http,
            Client(
                streamable_http_client(server.url, http_client=http),
                cache=None,
                message_handler=message_handler,
            ) as client,
        ):
            yield client
        return
    assert server.command is not None
    program, *args = server.command
    params = StdioServerParameters(command=program, args=args, env=dict(server.env) if server.env else None)
    async with Client(params, cache=None, message_handler=message_handler) as client:
        yield client


def _closed(client: Client) -> bool:
    """Whether the client's connection closed (a stdio server that exited, a dropped HTTP session).

    The SDK keeps the session's task group running after the server went away and fails each later
    request with "Connection closed" before sending it; its dispatcher's flag says so beforehand,
    so a call after a server died between two calls goes to a new session instead. A dispatcher
    without the flag (another SDK release) reads as open: that call is the tool error, the next
    one opens a new session.
    """
    dispatcher = getattr(client.session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


class McpSession:
    """The session of one server; :meth:`client` opens it when it is not open."""

    def __init__(self, server: McpServer, backoff_initial: float, backoff_max: float) -> None:
        self.server = server
        self.opened = 0
        """How many times a session was opened (a stdio server started)."""
        self.tools: list[types.Tool] | None = None
        """The server's listing, cached until it says its tools changed; None: list again."""
        self._backoff = (backoff_initial, backoff_max)
        self._failures = 0
        self._retry_at = 0.0
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._cache_off = False

    @property
    def is_open(self) -> bool:
        """Whether a session is open now: its task holds it, and its connection did not close."""
        client = self._client
        return client is not None and self._task is not None and not self._task.done() and not _closed(client)

    async def client(self) -> Client:
        """The open session's client, opened (after the backoff, if opening failed before) if needed.

        Raises:
            Exception: whatever opening the session raised (the caller describes it).
        """
        async with self._lock:
            if self.is_open:
                assert self._client is not None
                return self._client
            await self._drop()
            wait = self._retry_at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._task = asyncio.create_task(self._hold(ready, self._stop), name=f"mcp {self.server.name}")
            try:
                self._client = await asyncio.shield(ready)
            except BaseException:
                self._failures += 1
                initial, maximum = self._backoff
                self._retry_at = time.monotonic() + min(initial * 2 ** (self._failures - 1), maximum)
                await self._drop()
                raise
            self._failures = 0
            self.opened += 1
            self.tools = None
            return self._client

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        try:
            async with connect(self.server, self._on_message) as client:
                ready.set_result(client)
                listening = asyncio.create_task(self._listen(client))
                try:
                    await stop.wait()
                finally:
                    listening.cancel()
                    await asyncio.gather(listening, return_exceptions=True)
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
            elif not isinstance(error, asyncio.CancelledError):
                log.info("MCP server %r: its session ended: %r", self.server.name, error)
        finally:
            self._client = None

    async def _listen(self, client: Client) -> None:
        """Drops the cached listing on a 2026-era server's tools-changed events."""
        capability = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
            capability and capability.list_changed
        ):
            return
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for event in events:
                    if isinstance(event, ToolsListChanged):
                        self.tools = None
        except Exception as error:  # the listing is then never cached: correct, only slower
            log.info(
                "MCP server %r: no tools-changed events (%r): its tools are listed each time",
                self.server.name,
                error,
            )
            self._cache_off = True

    @property
    def caches(self) -> bool:
        """Whether the listing may be cached: the server can say when its tools change, or never does."""
        return not self._cache_off

    async def _on_message(self, message: Any) -> None:
        """Drops the cached listing on a 2025-era server's ``notifications/tools/list_changed``."""
        if isinstance(message, types.ToolListChangedNotification):
            self.tools = None

    async def reset(self) -> None:
        """Ends the session (a stdio server's process with it): the next call opens a new one."""
        async with self._lock:
            await self._drop()

    async def _drop(self) -> None:
        task, self._task, self._client = self._task, None, None
        self.tools = None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
        except BaseException:  # a session that will not close is cancelled, whatever it raised
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class McpSessions:
    """This worker's MCP sessions, one per declared server, by name.

    Args:
        backoff_initial: seconds before opening a session again after it failed to open, doubled
            at each failure in a row.
        backoff_max: the longest such wait.
    """

    def __init__(self, *, backoff_initial: float = 0.5, backoff_max: float = 30.0) -> None:
        self._backoff = (backoff_initial, backoff_max)
        self._sessions: dict[str, McpSession] = {}
        self._replaced: list[McpSession] = []

    def session(self, server: McpServer) -> McpSession:
        """The session of ``server`` (not opened yet, if no call has needed it)."""
        session = self._sessions.get(server.name)
        if session is None or session.server != server:
            if session is not None:  # another app's server of that name: closed with the rest
                self._replaced.append(session)
            session = McpSession(server, *self._backoff)
            self._sessions[server.name] = session
        return session

    async def close(self) -> None:
        """Closes every session; safe to repeat, and the sessions open again if used."""
        sessions = [*self._sessions.values(), *self._replaced]
        self._sessions, self._replaced = {}, []
        await asyncio.gather(*(session.reset() for session in sessions), return_exceptions=True)
