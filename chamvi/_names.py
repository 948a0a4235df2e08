"""The naming rule agents, channels, collections and other names share, in a module of its own.

Lowercase letters and digits in words joined by single ``-`` (``^[a-z0-9]+(-[a-z0-9]+)*$``), at most
64 characters: the seed's agent-name rule. It lives apart from the modules that define agents and
channels so that the client, the HTTP routes and the knowledge modules check a name without
importing the agent machinery (which imports tools, state and channels in turn).
"""

from __future__ import annotations

import re
from typing import Any

from chamvi._constants import NAME_MAX_LENGTH, NAME_PATTERN
from chamvi.errors import ChamviValidationError, InvalidAgentDefinitionError, ValidationIssue


def is_valid_name(name: Any) -> bool:
    """Whether ``name`` is a string that keeps the shared naming rule."""
    return isinstance(name, str) and len(name) <= NAME_MAX_LENGTH and re.match(NAME_PATTERN, name) is not None


def _checked(what: str, name: Any) -> str:
    if not is_valid_name(name):
        raise InvalidAgentDefinitionError(
            f"{what} name {name!r} is invalid: use lowercase letters and digits in words joined by single "
            f"'-' (^[a-z0-9]+(-[a-z0-9]+)*$), at most {NAME_MAX_LENGTH} characters"
        )
    return str(name)


def validate_agent_name(name: Any) -> str:
    """Checks the naming rule that agent, collection and other names share, and returns the name.

    Raises:
        InvalidAgentDefinitionError: the name breaks the rule or is too long.
    """
    return _checked("agent", name)


def validate_channel_name(name: Any) -> None:
    """Checks a channel's name against the shared naming rule, when the app registers it.

    Raises:
        InvalidAgentDefinitionError: the name breaks the rule or is too long.
    """
    _checked("channel", name)


def checked_agent_name(name: Any) -> str:
    """An agent name a caller gave (a runtime agent's put), as a validation with an issue at ``name``.

    Raises:
        ChamviValidationError: the name breaks the rule, one issue at ``name`` (code ``agent_name``).
    """
    if not is_valid_name(name):
        message = (
            "an agent's name is lowercase letters and digits in words joined by single '-' "
            f"(^[a-z0-9]+(-[a-z0-9]+)*$), at most {NAME_MAX_LENGTH} characters"
        )
        raise ChamviValidationError(
            f"agent name {name!r} is invalid: {message}",
            issues=[ValidationIssue(("name",), message, "agent_name")],
        )
    return str(name)
