"""Permissions of invokers and tokens, and tool policies that read them.

Permissions are ':'-separated. ``*`` alone grants everything, a ``*`` segment matches one segment,
and segment counts must match (the seed's rule, shared with the HTTP API's tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from chamvi.models import TriggerEnvelope


@dataclass(frozen=True)
class PolicyRun:
    """What a tool policy sees of a run (the trigger without its payload)."""

    run_id: str
    agent: str
    trigger: TriggerEnvelope


ToolPolicy = Callable[[str, PolicyRun], bool]


def matches_permission(granted: str, required: str) -> bool:
    """Whether the permission ``granted`` covers ``required`` under the rule of this module."""
    if granted == "*":
        return True
    granted_parts, required_parts = granted.split(":"), required.split(":")
    if len(granted_parts) != len(required_parts):
        return False
    return all(g == "*" or g == r for g, r in zip(granted_parts, required_parts, strict=True))


def has_permission(permissions: Iterable[str], required: str) -> bool:
    """Whether any of ``permissions`` covers ``required``."""
    return any(matches_permission(granted, required) for granted in permissions)


def has_narrowed_permission(permissions: Iterable[str], required: str) -> bool:
    """Whether any of ``permissions`` is ``required`` narrowed by one more segment.

    ``artifacts:read:support`` narrows ``artifacts:read`` to the agent ``support``: a route that takes
    narrowed permissions lets such a token in, and checks the last segment itself.
    """
    parts = required.split(":")
    for granted in permissions:
        head = granted.split(":")
        if len(head) == len(parts) + 1 and all(g == "*" or g == r for g, r in zip(head, parts, strict=False)):
            return True
    return False


def has_agent_permission(permissions: Iterable[str], required: str, agent: str) -> bool:
    """Whether ``permissions`` cover ``required`` for every agent, or narrowed to ``agent``.

    ``conversations:write`` covers each agent; ``conversations:write:support`` the agent ``support``
    only (see :func:`has_narrowed_permission` for the routes that let such a token in).
    """
    return has_permission(permissions, required) or has_permission(permissions, f"{required}:{agent}")


def tool_permission(agent: str, tool: str) -> str:
    """The permission an invoker needs for ``tool`` of ``agent`` under :func:`require_tool_permission`."""
    return f"tool:{agent}:{tool}"


def require_tool_permission(*, without_invoker: Literal["deny", "allow"] = "deny") -> ToolPolicy:
    """A tool policy offering a tool only when the invoker holds ``tool:<agent>:<tool>``.

    Runs without an invoker (cron, webhooks) get no tool unless ``without_invoker="allow"``.
    """

    def policy(tool: str, run: PolicyRun) -> bool:
        invoker = run.trigger.invoker
        if invoker is None:
            return without_invoker == "allow"
        return has_permission(invoker.permissions, tool_permission(run.agent, tool))

    return policy
