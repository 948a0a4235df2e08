"""Talking to MCP servers with the official ``mcp`` SDK: listing tools, calling one.

Listings and calls go through the worker's long-lived session of each server
(:mod:`chamvi.mcp._sessions`). A server that cannot be reached, goes away mid-call, or does not
answer within the server's ``timeout`` (else just before the tool timeout would end the attempt) is
a :class:`McpServerUnavailableError`: a tool error the model reads, which no retry of the attempt
would change; a server that went away is started again by the next call.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    RequestParamsMeta,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp.types import Tool as MCPTool
from pydantic import BaseModel, ConfigDict
from temporalio import activity

from chamvi._constants import MCP_META_EFFECT_KEY
from chamvi._heartbeat import doing
from chamvi.artifacts import artifact_file_part, is_artifact_media_type
from chamvi.errors import InvalidAgentDefinitionError, McpServerUnavailableError, McpToolError
from chamvi.mcp import McpServer, classify
from chamvi.mcp._sessions import McpSession, McpSessions, is_disconnect
from chamvi.models import ImagePart, McpToolHints, McpToolInfo
from chamvi.tools import TOOL_NAME_PATTERN, Tool, ToolContext


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


async def _listing(session: McpSession) -> list[MCPTool]:
    """The server's whole listing, from the session's cache while its tools did not change."""
    client = await session.client()
    if session.tools is not None:
        return session.tools
    listed: list[MCPTool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    if session.caches and session.is_open:
        session.tools = listed
    return listed


async def list_tools(server: McpServer, sessions: McpSessions) -> list[McpToolInfo]:
    """The server's tools the app uses, with the schemas and annotations the server gave.

    Raises:
        McpServerUnavailableError: the server could not be reached or failed to answer.
        InvalidAgentDefinitionError: the server lacks a tool ``tools=`` or ``effects=`` names, or
            lists one under a name models refuse.
    """
    budget = _budget(server)
    session = sessions.session(server)
    try:
        with doing(f"listing the tools of MCP server {server.name!r}"):
            async with asyncio.timeout(budget):
                listed = await _listing(session)
    except TimeoutError:
        raise McpServerUnavailableError(
            f"MCP server {server.name!r} ({server.where}) did not list its tools within {budget:g} s"
        ) from None
    except Exception as error:
        if is_disconnect(error):
            await session.reset()
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
            server=server.name,
            name=t.name,
            description=t.description or "",
            input_schema=t.input_schema,
            hints=_hints(t.annotations),
        )
        for t in tools
    ]


def _hints(annotations: ToolAnnotations | None) -> McpToolHints | None:
    if annotations is None:
        return None
    hints = McpToolHints(
        read_only=annotations.read_only_hint,
        destructive=annotations.destructive_hint,
        idempotent=annotations.idempotent_hint,
        open_world=annotations.open_world_hint,
    )
    return hints if hints.given else None


def _structured(result: CallToolResult, texts: list[str]) -> Any:
    """The structured content, unless it only wraps the text.

    Servers wrap a plain answer as one field (the Python SDK's ``{"result": ...}``, the filesystem
    server's ``{"content": ...}``); the text is what they meant a model to read.
    """
    structured = result.structured_content
    if structured is None:
        return None
    if texts and len(structured) == 1:
        (value,) = structured.values()
        if value == "\n".join(texts) or not isinstance(value, dict | list):
            return None
    return structured


def _media_type(given: str | None, fallback: str = "application/octet-stream") -> str:
    """``given`` as an artifact's media type (no parameters), else ``fallback``."""
    bare = (given or "").split(";")[0].strip().lower()
    return bare if is_artifact_media_type(bare) else fallback


async def _item(block: ContentBlock, ctx: ToolContext) -> str | dict[str, Any]:
    """One content block as a text, or as an image or file part of chamvi's (``chamvi.models.parts``).

    Bytes go to the run's artifacts and the part references them: history keeps the reference, the
    model gets the bytes as a part of its provider's (``artifact_file_part``'s way).
    """
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        media_type = _media_type(block.mime_type)
        stored = await ctx.artifacts.put(media_type, base64.b64decode(block.data))
        if media_type.startswith("image/"):
            return ImagePart(artifact=stored).model_dump(mode="json")
        return artifact_file_part(stored).model_dump(mode="json")
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return f"{resource.uri} ({resource.mime_type or 'text'}):\n{resource.text}"
        assert isinstance(resource, BlobResourceContents)
        name = PurePosixPath(urlsplit(resource.uri).path).name or None
        data = base64.b64decode(resource.blob)
        stored = await ctx.artifacts.put(_media_type(resource.mime_type), data, name)
        return artifact_file_part(stored).model_dump(mode="json")
    # a resource link: the model reads where it is, the server serves it
    return json.dumps(block.model_dump(mode="json", by_alias=True, exclude_none=True))


async def _output(server: McpServer, tool: str, result: CallToolResult, ctx: ToolContext) -> Any:
    """The result as history keeps it and the model reads it; never base64 text.

    All text: the text (or the structured content, when the server gave some beyond wrapping the
    text). With images, audio or embedded files: a list of texts and image and file parts, the
    bytes stored as the run's artifacts (``ctx.artifacts``), which the workflow hands the model as
    the parts of the tool's message (``chamvi.models.parts.tool_output_parts``); structured
    content follows as a JSON text.
    """
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        raise McpToolError(
            f"MCP tool {tool!r} of server {server.name!r} failed: {' '.join(texts) or 'no message'}"
        )
    structured = _structured(result, texts)
    if len(texts) == len(result.content):
        if structured is not None or not texts:
            return structured
        return "\n".join(texts)
    items = [await _item(block, ctx) for block in result.content]
    if structured is not None:
        items.append(json.dumps(structured))
    if all(isinstance(item, str) for item in items):  # text and resource links only
        return "\n".join(cast(list[str], items))
    return items


async def call_tool(
    server: McpServer,
    tool: str,
    arguments: dict[str, Any],
    sessions: McpSessions,
    ctx: ToolContext,
) -> Any:
    """Calls ``tool`` on ``server`` and returns its output as JSON-able data.

    An effect tool's call carries its effect key (``ctx.effect_key``) in ``_meta``
    (``MCP_META_EFFECT_KEY``); files in the result are stored in ``ctx.artifacts``.

    Raises:
        McpServerUnavailableError: the server could not be reached, went away during the call, or
            did not answer in time.
        McpToolError: the server answered with an error result.
    """
    # an open map in the SDK's types, whose checker only knows its literal keys
    key = ctx.effect_key
    meta = cast(RequestParamsMeta, {MCP_META_EFFECT_KEY: key}) if key is not None else None
    budget = _budget(server)
    session = sessions.session(server)
    try:
        with doing(f"tool {tool!r} of MCP server {server.name!r}"):
            async with asyncio.timeout(budget):
                client = await session.client()
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
        if is_disconnect(error):
            await session.reset()  # the next call starts the server again
        raise McpServerUnavailableError(
            f"MCP server {server.name!r} ({server.where}) failed during the call to {tool!r}: "
            f"{_describe(error)}"
        ) from None
    return await _output(server, tool, result, ctx)


def as_tool(server: McpServer, name: str, sessions: McpSessions, hints: McpToolHints | None = None) -> Tool:
    """``name`` of ``server`` as a tool the tool runner calls.

    Its trust and effect come from its annotations (``hints``, as the run listed them) and the
    server's declaration (:func:`chamvi.mcp.classify`).
    """
    trust, effect = classify(server, name, hints)

    async def call(arguments: McpArguments, ctx: ToolContext) -> Any:
        return await call_tool(server, name, arguments.model_dump(mode="json"), sessions, ctx)

    return Tool(
        name=name,
        description=f"tool {name!r} of MCP server {server.name!r}",
        fn=call,
        input_model=McpArguments,
        context_param="ctx",
        model_param="arguments",
        effect=effect,
        trust=trust,
    )
