"""What crosses the workflow and its activities about tools from MCP servers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class McpToolHints(BaseModel):
    """A tool's annotations as its MCP server gave them (``readOnlyHint`` ...); None: not given.

    Only the hints a server sets count (``chamvi.mcp`` turns them into trust and effect defaults):
    the protocol's own defaults for missing hints (not read-only, destructive, open world) would
    guard every tool of a server that gives none.
    """

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @property
    def given(self) -> bool:
        """Whether the server set any hint at all."""
        hints = (self.read_only, self.destructive, self.idempotent, self.open_world)
        return any(hint is not None for hint in hints)


class McpToolInfo(BaseModel):
    """One tool as its MCP server lists it; the input schema reaches the model as the server wrote it."""

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    hints: McpToolHints | None = Field(default=None, exclude_if=lambda v: v is None)
    """Its annotations; None for a tool listed without any (and in listings recorded before hints)."""


class McpListRequest(BaseModel):
    """Input of the ``chamvi.list_mcp_tools`` activity: the declared server to list."""

    server: str


class McpToolList(BaseModel):
    """Result of ``chamvi.list_mcp_tools``: the server's tools the app offers (its ``tools=`` filter)."""

    server: str
    tools: list[McpToolInfo] = Field(default_factory=list)
