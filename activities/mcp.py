"""Listing an MCP server's tools, once per run: the model is offered what the run listed."""

from __future__ import annotations

from temporalio import activity

from chamvi._heartbeat import heartbeating
from chamvi._mcp_client import list_tools
from chamvi.app import App
from chamvi.constants import ACTIVITY_LIST_MCP_TOOLS
from chamvi.mcp_sessions import McpSessions
from chamvi.models import McpListRequest, McpToolList


class McpActivities:
    """Holds the app, whose declared MCP servers the activity reaches, and the worker's sessions."""

    def __init__(self, app: App, sessions: McpSessions | None = None) -> None:
        self.app = app
        self.sessions = sessions or McpSessions()

    @activity.defn(name=ACTIVITY_LIST_MCP_TOOLS)
    async def list_mcp_tools(self, request: McpListRequest) -> McpToolList:
        """The tools of one declared MCP server that the app uses, with the server's own schemas.

        It heartbeats like a tool call, so a listing on a worker that died is tried again within the
        tool heartbeat timeout rather than the whole tool timeout.
        """
        server = self.app.mcp_server(request.server)
        async with heartbeating():
            tools = await list_tools(server, self.sessions)
        return McpToolList(server=server.name, tools=tools)
