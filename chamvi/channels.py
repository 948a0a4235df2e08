"""Channels: where runs come from and where tools send messages.

Outbound is tool-driven: a run never sends a message of its own. ``emit`` is an effect, so
identical emits of one run (and a step redone after a crash) send once.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from chamvi.constants import DEFAULT_APPROVAL_TIMEOUT, NAME_MAX_LENGTH, NAME_PATTERN
from chamvi.errors import ChamviValidationError, ChannelNotFoundError, InvalidAgentDefinitionError
from chamvi.models import ApprovalDecision
from chamvi.run_context import Approvals, EffectLedger, RunContext, request_approval


@dataclass(frozen=True)
class ChannelMessage:
    """What a channel's ``out`` receives; ``key`` lets the receiver dedupe too."""

    body: str
    address: str
    key: str
    title: str | None = None


@runtime_checkable
class Channel(Protocol):
    """Read-only members, so a channel whose default address is always set still is a Channel."""

    @property
    def name(self) -> str:
        """The name agents subscribe by and runs record as their ``channel``."""
        ...

    @property
    def default_address(self) -> str | None:
        """Where a message goes when neither the tool nor the run's trigger names an address."""
        ...

    @property
    def untrusted(self) -> bool:
        """Whether what arrives through this channel is untrusted: a run it starts is tainted."""
        ...

    async def out(self, message: ChannelMessage) -> None:
        """Delivers one message; ``message.key`` is the same on a retry, for the receiver to dedupe."""
        ...


@dataclass(frozen=True)
class ChannelSubscription:
    """An agent's subscription to a registered channel; ``id``, when given, must be unique per agent."""

    channel: str
    id: str | None = None


def validate_channel_name(name: str) -> None:
    """Checks a channel's name against the shared naming rule, when the app registers it.

    Raises:
        InvalidAgentDefinitionError: the name breaks the rule or is too long.
    """
    if not isinstance(name, str) or len(name) > NAME_MAX_LENGTH or not re.match(NAME_PATTERN, name):
        raise InvalidAgentDefinitionError(
            f"channel name {name!r} is invalid: use lowercase words joined by '-', at most {NAME_MAX_LENGTH}"
        )


class ConsoleChannel:
    """The development channel: out only, one header line per message, then the body lines."""

    untrusted = False

    def __init__(self, name: str, write: Callable[[str], Any]) -> None:
        validate_channel_name(name)
        self.name = name
        self.default_address = name
        self._write = write

    async def out(self, message: ChannelMessage) -> None:
        """Writes the message as lines; a failed write is reported on stderr, never raised."""
        header = f"[{self.name} -> {message.address}]" + (f" {message.title}" if message.title else "")
        for line in [header, *message.body.splitlines()]:
            try:
                written = self._write(line)
                if inspect.isawaitable(written):
                    await written
            except Exception as error:  # the console channel never throws, by contract
                print(f"console channel {self.name!r} could not write: {error}", file=sys.stderr)


def console_channel(name: str = "console", write: Callable[[str], Any] | None = None) -> ConsoleChannel:
    """A development channel that writes each message as lines (default: ``print``)."""
    return ConsoleChannel(name=name, write=write or print)


def emit_key(run_id: str, channel: str, address: str, title: str | None, body: str) -> str:
    """The effect key of an emit without a key of its own, so one message to one place sends once per run."""
    canonical = json.dumps({"address": address, "title": title, "body": body}, sort_keys=True)
    return f"{run_id}:emit:{channel}:{hashlib.sha256(canonical.encode()).hexdigest()}"


class ChannelHandle:
    """A registered channel as a tool sees it, bound to the run."""

    def __init__(
        self,
        channel: Channel,
        run: RunContext,
        effects: EffectLedger,
        approvals: Approvals,
        source_address: str | None,
    ) -> None:
        self.channel = channel
        self._run = run
        self._effects = effects
        self._approvals = approvals
        self._source_address = source_address

    @property
    def name(self) -> str:
        """The channel's name."""
        return self.channel.name

    async def emit(
        self, body: str, *, title: str | None = None, key: str | None = None, address: str | None = None
    ) -> None:
        """Sends a message once per key; the address defaults to the run's source address."""
        target = address or self._source_address or self.channel.default_address
        if not target:
            raise ChamviValidationError(
                f"channel {self.name!r} has no address for this message: pass address= or give the "
                "channel a default address"
            )
        effect_key = key or emit_key(self._run.run_id, self.name, target, title, body)
        found, _ = await self._effects.lookup(effect_key)
        if found:
            return
        await self.channel.out(ChannelMessage(body=body, title=title, address=target, key=effect_key))
        self._effects.record(effect_key, {"sent": True})

    async def approve(
        self,
        *,
        title: str,
        body: str | None = None,
        address: str | None = None,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    ) -> ApprovalDecision:
        """``approve()``, with the request delivered through this channel (once, with its deadline)."""
        if not self._approvals.next_is_answered:
            until = datetime.now(UTC) + timeout
            lines = [*([body] if body else []), f"Waiting for an answer until {until:%Y-%m-%d %H:%M} UTC."]
            index = self._approvals.next_index
            key = f"{self._run.run_id}:approval:{self._run.step}:{self._run.tool_call_id}:{index}"
            await self.emit("\n".join(lines), title=f"Approval needed: {title}", key=key, address=address)
        return request_approval(self._approvals, title=title, body=body, timeout=timeout)


class ChannelAccess:
    """``ctx.channels``: find the run's source channel or another registered one."""

    def __init__(
        self, channels: dict[str, Channel], run: RunContext, effects: EffectLedger, approvals: Approvals
    ) -> None:
        self._channels = channels
        self._run = run
        self._effects = effects
        self._approvals = approvals

    def _handle(self, channel: Channel) -> ChannelHandle:
        trigger = self._run.trigger
        source = trigger.address if channel.name == trigger.channel else None
        return ChannelHandle(channel, self._run, self._effects, self._approvals, source)

    def find_one(self, name: str | None = None) -> ChannelHandle | None:
        """The named channel, or without a name the run's source channel; None when absent."""
        target = name if name is not None else self._run.trigger.channel
        channel = self._channels.get(target) if target else None
        return self._handle(channel) if channel is not None else None

    def find_one_or_fail(self, name: str | None = None) -> ChannelHandle:
        """Like ``find_one``, but a missing channel is ``channel_not_found`` (a tool error)."""
        handle = self.find_one(name)
        if handle is None:
            target = name if name is not None else self._run.trigger.channel
            known = ", ".join(repr(n) for n in self._channels) or "none"
            raise ChannelNotFoundError(
                f"no channel {target!r} to send through: registered channels are {known}"
            )
        return handle

    def find(self) -> list[ChannelHandle]:
        """Every registered channel."""
        return [self._handle(channel) for channel in self._channels.values()]
