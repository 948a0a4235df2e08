"""What crosses the workflow and its activities about tools from MCP servers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class McpToolInfo(BaseModel):
    """One tool as its MCP server lists it; the input schema reaches the model as the server wrote it."""

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)


class McpListRequest(BaseModel):
    """Input of the ``chamvi.list_mcp_tools`` activity: the declared server to list."""

    server: str


class McpToolList(BaseModel):
    """Result of ``chamvi.list_mcp_tools``: the server's tools the app offers (its ``tools=`` filter)."""

    server: str
    tools: list[McpToolInfo] = Field(default_factory=list)
