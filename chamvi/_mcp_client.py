"""Talking to MCP servers with the official ``mcp`` SDK: listing tools, calling one.

Each listing and each call opens its own connection (a stdio server is started for it), the way
temporalio's stateless MCP servers work: a call that lives in one activity attempt holds nothing a
killed worker could leave half open, and a server that restarted between calls is simply reached
again. A server that cannot be reached, goes away mid-call, or does not answer within the server's
``timeout`` (else just before the tool timeout would end the attempt) is a
:class:`McpServerUnavailableError`: a tool error the model reads, which no retry of the attempt
would change.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, RequestParamsMeta, TextContent
from pydantic import BaseModel, ConfigDict
from temporalio import activity

from chamvi._heartbeat import doing
from chamvi.constants import MCP_META_EFFECT_KEY
from chamvi.errors import InvalidAgentDefinitionError, McpServerUnavailableError, McpToolError
from chamvi.mcp import McpServer
from chamvi.models import McpToolInfo
from chamvi.tools import TOOL_NAME_PATTERN, Tool, ToolContext

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults: a server may hold a response stream open for as long as a tool runs
(the tool activity's timeout bounds the call as a whole)."""


class McpArguments(BaseModel):
    """A call's arguments as the model wrote them: the server checks them against its own schema.

    Extra fields are kept and read as attributes (``args.title``) by effect keys and hooks.
    """

    model_config = ConfigDict(extra="allow")


ANSWER_MARGIN_SECONDS = 5.0
"""Time kept back from the tool timeout to answer with the tool error before Temporal times out."""


def _budget(server: McpServer) -> float | None:
    """Seconds a listing or call may wait: the server's timeout, within the attempt's timeout.

    Past the attempt's end Temporal would retry the call, so it ends a margin before, as a tool
    error. The margin is counted from the timeout alone, not from the attempt's start time: that is
    the server's clock, and a worker's clock ahead of it would cut every call short.
    """
    limits = [server.timeout.total_seconds()] if server.timeout is not None else []
    if activity.in_activity():
        timeout = activity.info().start_to_close_timeout
        if timeout:
            total = timeout.total_seconds()
            limits.append(total - min(ANSWER_MARGIN_SECONDS, total / 10))
    return min(limits) if limits else None


def _describe(error: BaseException) -> str:
    """What went wrong, on one line; the SDK reports transport failures as exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    if isinstance(error, MCPError):
        return str(error.error.message)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


@asynccontextmanager
async def _connect(server: McpServer) -> AsyncIterator[Client]:
    if server.url is not None:
        async with (
            httpx2.AsyncClient(headers=dict(server.headers), timeout=HTTP_TIMEOUT) as http,
            Client(streamable_http_client(server.url, http_client=http), cache=None) as client,
        ):
            yield client
        return
    assert server.command is not None
    program, *args = server.command
    params = StdioServerParameters(command=program, args=args, env=dict(server.env) if server.env else None)
    async with Client(params, cache=None) as client:
        yield client


async def list_tools(server: McpServer) -> list[McpToolInfo]:
    """The server's tools the app uses, with the schemas the server gave.

    Raises:
        McpServerUnavailableError: the server could not be reached or failed to answer.
        InvalidAgentDefinitionError: the server lacks a tool ``tools=`` or ``effects=`` names, or
            lists one under a name models refuse.
    """
    listed = []
    budget = _budget(server)
    try:
        with doing(f"listing the tools of MCP server {server.name!r}"):
            async with asyncio.timeout(budget), _connect(server) as client:
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
    except TimeoutError:
        raise McpServerUnavailableError(
            f"MCP server {server.name!r} ({server.where}) did not list its tools within {budget:g} s"
        ) from None
    except Exception as error:
        raise McpServerUnavailableError(
            f"MCP server {server.name!r} ({server.where}) could not list its tools: {_describe(error)}"
        ) from None
    names = [t.name for t in listed]
    for wanted in (*(server.tools or ()), *server.effects):
        if wanted not in names:
            offered = ", ".join(repr(n) for n in names) or "none"
            raise InvalidAgentDefinitionError(
                f"MCP server {server.name!r} lists no tool {wanted!r} (named in its tools= or effects=): "
                f"it lists {offered}"
            )
    tools = [t for t in listed if server.offers(t.name)]
    for t in tools:
        if not TOOL_NAME_PATTERN.match(t.name):
            raise InvalidAgentDefinitionError(
                f"MCP server {server.name!r} lists tool {t.name!r}, a name models refuse (1-64 letters, "
                "digits, '_' or '-'): leave it out with mcp_server(tools=[...])"
            )
    return [
        McpToolInfo(
            server=server.name, name=t.name, description=t.description or "", input_schema=t.input_schema
        )
        for t in tools
    ]


def _output(server: McpServer, tool: str, result: CallToolResult) -> Any:
    """The result as the model reads it: the text the server wrote, else its structured content.

    Text first: servers (the SDK's own) also wrap a plain answer as ``{"result": ...}`` structured
    content, and the text is what the server meant a model to read. Other blocks (images, resources)
    are kept as the protocol describes them.
    """
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        raise McpToolError(
            f"MCP tool {tool!r} of server {server.name!r} failed: {' '.join(texts) or 'no message'}"
        )
    if texts and len(texts) == len(result.content):
        return "\n".join(texts)
    if result.structured_content is not None:
        return result.structured_content
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


async def call_tool(
    server: McpServer, tool: str, arguments: dict[str, Any], effect_key: str | None = None
) -> Any:
    """Calls ``tool`` on ``server`` and returns its output as JSON-able data.

    An effect tool's call carries its effect key in ``_meta`` (``MCP_META_EFFECT_KEY``).

    Raises:
        McpServerUnavailableError: the server could not be reached, went away during the call, or
            did not answer in time.
        McpToolError: the server answered with an error result.
    """
    # an open map in the SDK's types, whose checker only knows its literal keys
    meta = cast(RequestParamsMeta, {MCP_META_EFFECT_KEY: effect_key}) if effect_key is not None else None
    budget = _budget(server)
    try:
        with doing(f"tool {tool!r} of MCP server {server.name!r}"):
            async with asyncio.timeout(budget), _connect(server) as client:
                result = await client.call_tool(tool, arguments, meta=meta)
    except TimeoutError:
        own = server.timeout is not None and budget == server.timeout.total_seconds()
        bound = "the server's timeout" if own else "the tool timeout"
        raise McpServerUnavailableError(
            f"MCP server {server.name!r} ({server.where}) did not answer the call to {tool!r} within "
            f"{budget:g} s ({bound}): a hung server is not called again; raise mcp_server(timeout=...) "
            "or ActivityTimeouts(tool=...) if the tool is slow"
        ) from None
    except Exception as error:
        raise McpServerUnavailableError(
            f"MCP server {server.name!r} ({server.where}) failed during the call to {tool!r}: "
            f"{_describe(error)}"
        ) from None
    return _output(server, tool, result)


def as_tool(server: McpServer, name: str) -> Tool:
    """``name`` of ``server`` as a tool the tool runner calls: its trust and effect come from the server."""

    async def call(arguments: McpArguments, ctx: ToolContext) -> Any:
        return await call_tool(server, name, arguments.model_dump(mode="json"), ctx.effect_key)

    return Tool(
        name=name,
        description=f"tool {name!r} of MCP server {server.name!r}",
        fn=call,
        input_model=McpArguments,
        context_param="ctx",
        model_param="arguments",
        effect=server.effects.get(name),
        trust=server.trust,
    )
