"""Listing an MCP server's tools, once per run: the model is offered what the run listed."""

from __future__ import annotations

from temporalio import activity

from chamvi._constants import ACTIVITY_LIST_MCP_TOOLS
from chamvi._heartbeat import heartbeating
from chamvi.mcp._client import list_tools
from chamvi.models import McpListRequest, McpToolList
from chamvi.worker_state import AppRuntime


class McpActivities:
    """Lists the app's declared MCP servers through the worker's sessions (its runtime's)."""

    def __init__(self, runtime: AppRuntime) -> None:
        self.runtime = runtime

    @activity.defn(name=ACTIVITY_LIST_MCP_TOOLS)
    async def list_mcp_tools(self, request: McpListRequest) -> McpToolList:
        """The tools of one declared MCP server that the app uses, with the server's own schemas.

        It heartbeats like a tool call, so a listing on a worker that died is tried again within the
        tool heartbeat timeout rather than the whole tool timeout.
        """
        server = self.runtime.app.mcp_server(request.server)
        async with heartbeating():
            tools = await list_tools(server, self.runtime.mcp_sessions)
        return McpToolList(server=server.name, tools=tools)
