"""Tools from MCP servers: ``mcp_server(...)`` declared on the App, ``mcp_tools(name)`` given to an agent.

An MCP server is a third-party tool (the seed's word): its tools are trusted unless their
annotations, the server's ``trust=`` or ``untrusted=``, or the agent's ``trust.tools`` classify them
(:func:`classify`), and they go through tool policies, hooks, the taint guard and effects like the
agent's own tools. A run lists each of its servers' tools once, at its start (an activity), and
each call is its own ``chamvi.call_tool`` activity with the timeout and retry rules of any tool.

This module holds the declarations only; the official ``mcp`` SDK, which loads an HTTP client and
a web framework, is imported by the worker's side (``chamvi.mcp._client``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

from chamvi._constants import NAME_MAX_LENGTH, NAME_PATTERN
from chamvi.errors import InvalidAgentDefinitionError
from chamvi.models.mcp import McpToolHints
from chamvi.tools import TOOL_NAME_PATTERN, EffectSpec, Predicate, ToolContext, Trust

UNCLASSIFIED = Trust()
"""A server's tools without ``trust=``: results do not taint the run, calls are never guarded."""


@dataclass(frozen=True)
class McpServer:
    """An MCP server as :func:`mcp_server` checked it; exactly one of ``command`` and ``url`` is set."""

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    tools: tuple[str, ...] | None = None
    trust: Trust = UNCLASSIFIED
    effects: Mapping[str, EffectSpec] = field(default_factory=dict)
    timeout: timedelta | None = None
    """How long one listing or call may wait for the server; None: until just before the tool
    timeout (``ActivityTimeouts.tool``) would end the attempt."""
    untrusted: bool = False
    """Every tool taints the run and is guarded once it is tainted; its annotations set no trust."""

    @property
    def where(self) -> str:
        """The server's URL without credentials, or the command that starts it, for messages.

        Messages end up in run histories, so a token in a URL's user part stays out of them.
        """
        if self.url is None:
            return " ".join(self.command or ())
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))

    def offers(self, tool: str) -> bool:
        """Whether the app uses ``tool`` of this server (its ``tools=`` filter, if any)."""
        return self.tools is None or tool in self.tools


@dataclass(frozen=True)
class McpTools:
    """What :func:`mcp_tools` hands ``define_agent(tools=...)``: every tool of one declared server."""

    server: str


def _names(server: str, what: str, names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise InvalidAgentDefinitionError(f"MCP server {server!r}: {what} must be a list of tool names")
    for name in names:
        if not TOOL_NAME_PATTERN.match(name):
            raise InvalidAgentDefinitionError(
                f"MCP server {server!r}: tool name {name!r} in {what} is invalid: models accept "
                "1-64 letters, digits, '_' or '-'"
            )
    if len(set(names)) != len(names):
        raise InvalidAgentDefinitionError(f"MCP server {server!r}: {what} names a tool twice")
    return tuple(names)


def _strings(server: str, what: str, values: Mapping[str, str] | None) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in values.items()
    ):
        raise InvalidAgentDefinitionError(f"MCP server {server!r}: {what} must map strings to strings")
    return dict(values)


def mcp_server(
    name: str,
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    tools: Sequence[str] | None = None,
    trust: Trust = UNCLASSIFIED,
    effects: Mapping[str, EffectSpec] | None = None,
    timeout: timedelta | None = None,
    untrusted: bool = False,
) -> McpServer:
    """Declares an MCP server for ``App(mcp_servers=[...])``.

    Args:
        name: how agents refer to it (``mcp_tools(name)``): lowercase words joined by '-'.
        command: a stdio server: the program and its arguments, started once per worker (see
            ``chamvi.mcp._sessions``).
        url: a streamable-HTTP server, e.g. ``http://localhost:8000/mcp``.
        headers: HTTP headers of every request to ``url`` (an ``Authorization`` token).
        env: extra environment variables of the ``command`` (a token the server reads).
        tools: the server's tools the app uses; None takes every tool it lists.
        trust: how every tool's results are classified, on top of what each tool's annotations say
            (:func:`classify`): ``Trust(taint=True)`` marks the run untrusted after a call,
            ``Trust(guard_when_tainted=True)`` needs an approval once the run is tainted. A tool
            without annotations on a server without ``trust=`` is trusted (the seed's rule for
            third-party tools).
        effects: tools with a side effect, by name, each applied once per effect key like an
            ``@effect_tool``: ``EffectSpec(effect_key=..., already_applied=...)``; it replaces the
            effect a tool's annotations imply.
        timeout: how long a call may wait for the server; then it is the tool error
            ``mcp_server_unavailable`` the model reads, never retried (a hung server stays hung).
            None: the tool timeout (``ActivityTimeouts(tool=...)``, 5 minutes) bounds it, ending
            the call just before Temporal would time the attempt out and retry it.
        untrusted: the server as a whole is untrusted: each of its tools taints the run and is
            guarded once the run is tainted, whatever its annotations claim (the protocol says
            annotations of an untrusted server are not to be relied on); the agent's ``trust.tools``
            still classifies single tools.

    Raises:
        InvalidAgentDefinitionError: naming what is wrong.
    """
    if not isinstance(name, str) or not re.match(NAME_PATTERN, name) or len(name) > NAME_MAX_LENGTH:
        raise InvalidAgentDefinitionError(
            f"MCP server name {name!r} is invalid: use lowercase letters and digits in words joined by "
            f"single '-', at most {NAME_MAX_LENGTH} characters"
        )
    if (command is None) == (url is None):
        raise InvalidAgentDefinitionError(
            f"MCP server {name!r}: give exactly one of command=[...] (stdio) and url=... (streamable HTTP)"
        )
    if command is not None and (
        isinstance(command, str) or not command or not all(isinstance(part, str) and part for part in command)
    ):
        raise InvalidAgentDefinitionError(
            f"MCP server {name!r}: command must be a non-empty list of strings, e.g. ['npx', 'my-server']"
        )
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise InvalidAgentDefinitionError(
            f"MCP server {name!r}: url {url!r} must start with http:// or https://"
        )
    if headers and url is None:
        raise InvalidAgentDefinitionError(f"MCP server {name!r}: headers= applies to url= servers only")
    if env and command is None:
        raise InvalidAgentDefinitionError(f"MCP server {name!r}: env= applies to command= servers only")
    if not isinstance(trust, Trust):
        raise InvalidAgentDefinitionError(f"MCP server {name!r}: trust must be a Trust(...)")
    if not isinstance(untrusted, bool):
        raise InvalidAgentDefinitionError(f"MCP server {name!r}: untrusted must be True or False")
    if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
        raise InvalidAgentDefinitionError(
            f"MCP server {name!r}: timeout must be a positive timedelta, e.g. timedelta(seconds=30)"
        )
    offered = _names(name, "tools", tools) if tools is not None else None
    effects = dict(effects or {})
    _names(name, "effects", list(effects))
    for tool, spec in effects.items():
        if not isinstance(spec, EffectSpec):
            raise InvalidAgentDefinitionError(
                f"MCP server {name!r}: effects[{tool!r}] must be an "
                "EffectSpec(effect_key=..., already_applied=...)"
            )
        if offered is not None and tool not in offered:
            raise InvalidAgentDefinitionError(
                f"MCP server {name!r}: effects names {tool!r}, which tools= leaves out"
            )
    return McpServer(
        name=name,
        command=tuple(command) if command is not None else None,
        url=url,
        headers=_strings(name, "headers", headers),
        env=_strings(name, "env", env) or None,
        tools=offered,
        trust=trust,
        effects=effects,
        timeout=timeout,
        untrusted=untrusted,
    )


def mcp_tools(server: str) -> list[McpTools]:
    """The tools of the declared MCP server ``server``, for ``define_agent(tools=[..., *mcp_tools(...)])``.

    Raises:
        InvalidAgentDefinitionError: ``server`` is not a server name.
    """
    if not isinstance(server, str) or not re.match(NAME_PATTERN, server):
        raise InvalidAgentDefinitionError(f"mcp_tools({server!r}): give the name of an mcp_server(...)")
    return [McpTools(server)]


def _either(first: Predicate, second: Predicate) -> Predicate:
    """Holds when either holds: a server's ``trust=`` adds to what a tool's annotations say."""
    if first is True or second is True:
        return True
    if first is False:
        return second
    if second is False:
        return first

    async def both(arguments: object, ctx: ToolContext) -> bool:
        for flag in (first, second):
            assert callable(flag)
            held = flag(arguments, ctx)
            if await held if inspect.isawaitable(held) else held:
                return True
        return False

    return both


def classify(server: McpServer, tool: str, hints: McpToolHints | None) -> tuple[Trust, EffectSpec | None]:
    """The trust and effect handling of ``tool`` of ``server``, from its annotations and the server's.

    ========================================  ============================================================
    the tool's annotations (as the server     here, by default
    sets them)
    ========================================  ============================================================
    none                                      trusted: never taints, never guarded, no effect (the seed's
                                              rule for third-party tools)
    ``readOnlyHint: true``                    a reader: never guarded, no effect
    ``readOnlyHint: false`` (a writer)        an effect, applied once per effect key (the default key,
                                              ``<run>:<tool>:<sha256 of input>``, goes in ``_meta``)
    a writer, ``destructiveHint`` true or     guarded once the run is tainted (approval, or denied with
    not given                                 ``on_tainted="deny"``)
    a writer with ``openWorldHint: true``     guarded once the run is tainted (it reaches outside)
    a writer with ``idempotentHint: true``    no effect: calling it again changes nothing
    ``openWorldHint: true``                   its results taint the run (content from the open world)
    ========================================  ============================================================

    A ``destructiveHint: true`` without ``readOnlyHint`` counts as a writer. Then, in this order:
    the server's ``trust=`` adds its flags to every tool's; ``untrusted=True`` makes every tool taint
    and guarded, annotations aside; ``effects=`` replaces a tool's implied effect; and the agent's
    ``AgentTrust(tools={name: Trust(...)})`` replaces the tool's trust as a whole (applied by the tool
    runner).
    """
    hints = hints or McpToolHints()
    writes = hints.read_only is False or (hints.read_only is None and hints.destructive is True)
    destructive = writes and hints.destructive is not False
    implied = Trust(
        taint=hints.open_world is True,
        guard_when_tainted=writes and (destructive or hints.open_world is True),
    )
    if server.untrusted:
        implied = Trust(taint=True, guard_when_tainted=True)
    trust = Trust(
        taint=_either(implied.taint, server.trust.taint),
        guard_when_tainted=_either(implied.guard_when_tainted, server.trust.guard_when_tainted),
    )
    effect = server.effects.get(tool)
    if effect is None and writes and hints.idempotent is not True:
        effect = EffectSpec()
    return trust, effect
