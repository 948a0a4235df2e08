"""Channels: where runs come from and where tools send messages.

Outbound is tool-driven: a run never sends a message of its own. ``emit`` is an effect, so
identical emits of one run (and a step redone after a crash) send once; its key is recorded in the
run as soon as ``out`` returns, so a worker killed later in the same tool call does not send it again.

Inbound: a channel with ``start(ctx)`` / ``stop()`` is started by every worker's lifecycle
(``ChamviPlugin``) and dispatches through its :class:`ChannelContext` (``chamvi._inbound`` has the
one chamvi hands it); the built-in
webhook channel (``chamvi.webhooks``) receives through a route of the HTTP API instead. Either way an
inbound delivery carries a key, so the same delivery seen by two replicas starts one run per
subscription.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from chamvi._constants import DEFAULT_APPROVAL_TIMEOUT
from chamvi._names import validate_channel_name as validate_channel_name
from chamvi._run_context import Approvals, EffectLedger, RunContext, request_approval
from chamvi.approval_tokens import ApprovalTokens
from chamvi.errors import (
    ChamviValidationError,
    ChannelNotFoundError,
    InvalidAgentDefinitionError,
    InvalidRunStateError,
    ToolDeniedError,
)
from chamvi.models import ApprovalDecision, approval_id


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
class StartedRun:
    """One run an inbound delivery started (or had started before: ``created`` is False then)."""

    agent: str
    subscription: str | None
    run_id: str
    created: bool
    conversation: str | None = None
    """The conversation the delivery went into (its subscription routes to conversations); the run
    is its turn, which starts once the turns before it have ended."""


class ChannelContext(Protocol):
    """What a channel receives with: ``dispatch`` starts the runs one inbound delivery asks for.

    A protocol, so that channels depend on the shape alone; ``chamvi._inbound.InboundContext`` is
    the one workers and the HTTP API hand a channel.
    """

    @property
    def channel(self) -> str:
        """The channel's name; every run it starts records it as its ``channel``."""
        ...

    async def dispatch(
        self, payload: Any = None, *, key: str, address: str | None = None
    ) -> list[StartedRun]:
        """Starts a run of every subscribed agent whose filter accepts the delivery.

        See ``chamvi._inbound.InboundContext.dispatch`` for the arguments and what it answers.
        """
        ...


@runtime_checkable
class LifecycleChannel(Protocol):
    """A channel that receives on its own (polls, listens): every worker starts and stops it.

    ``start`` runs once the worker polls and must return soon (start a task for a long poll);
    ``stop`` runs when the worker's run ends. Every replica starts its channels, so what one
    dispatches carries a delivery key (``ctx.dispatch(..., key=...)``): a delivery two replicas see
    starts one run per subscription.
    """

    async def start(self, ctx: ChannelContext) -> None:
        """Begins receiving; dispatch runs through ``ctx``."""
        ...

    async def stop(self) -> None:
        """Stops receiving; nothing is dispatched after it returns."""
        ...


@dataclass(frozen=True)
class InboundEvent:
    """One inbound delivery, as a subscription's filter sees it."""

    channel: str
    key: str
    """The delivery's key (a webhook's delivery id): the runs it starts are idempotent on it."""
    payload: Any = None
    address: str | None = None
    """Where the event came from on the channel, and where replies on it go by default."""
    event: str | None = None
    """The event's type, as its sender names it (``issues``, ``app_mention``, ``invoice.paid``)."""


SubscriptionFilter = Callable[[InboundEvent], bool]


@dataclass(frozen=True)
class ChannelSubscription:
    """An agent's subscription to a registered channel.

    Attributes:
        channel: the registered channel's name.
        id: unique per agent, carried by the trigger envelope of the runs it starts.
        filter: which inbound events start a run (all when None); it sees the event's type as
            ``event.event`` and its payload as ``event.payload``.
        events: the event types that start a run (all when None), checked before ``filter``: an
            entry matches the type (``"issues"``) or the type and the payload's ``action``
            (``"issues.opened"``).
        conversation: routes each event into a conversation instead of a run of its own: a function
            of the event that names the conversation (``lambda event: event.address``: each Slack
            thread, each GitHub issue is one conversation, ``<channel>:<key>``); the turn's answer
            goes back through the channel to the event's address. An event it names no key for
            (None) starts an ordinary run.
        message: the message text of a routed event; by default the payload's ``text`` field when it
            is a string, else the payload itself (a string as it is, anything else as JSON).
    """

    channel: str
    id: str | None = None
    filter: SubscriptionFilter | None = None
    events: Collection[str] | None = None
    conversation: Callable[[InboundEvent], str | None] | None = None
    message: Callable[[InboundEvent], str] | None = None

    def __post_init__(self) -> None:
        if self.events is not None and (
            isinstance(self.events, str) or not all(isinstance(e, str) and e for e in self.events)
        ):
            raise InvalidAgentDefinitionError(
                f"subscription to channel {self.channel!r}: events must be a list of event types, such "
                f"as events=['issues.opened'], not {self.events!r}"
            )

    def message_text(self, event: InboundEvent) -> str:
        """The text a routed event becomes in its conversation."""
        if self.message is not None:
            return str(self.message(event))
        payload = event.payload
        if isinstance(payload, dict) and isinstance(payload.get("text"), str):
            return str(payload["text"])
        return payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True)

    def accepts(self, event: InboundEvent) -> bool:
        """Whether ``event`` starts a run of the subscribed agent."""
        return (
            event.channel == self.channel
            and (self.events is None or event_matches(event, self.events))
            and (self.filter is None or bool(self.filter(event)))
        )


def event_matches(event: InboundEvent, types: Collection[str]) -> bool:
    """Whether the event's type, alone or with its payload's ``action`` (``issues.opened``), is listed."""
    if event.event is None:
        return False
    action = event.payload.get("action") if isinstance(event.payload, dict) else None
    return event.event in types or (isinstance(action, str) and f"{event.event}.{action}" in types)


def channel_sends(channel: object) -> bool:
    """Whether the channel has an ``out`` that can deliver.

    A channel that only receives (a ``LifecycleChannel`` without ``out``) cannot, nor can one that
    says so (a webhook channel without a URL: ``sends`` is False).
    """
    return callable(getattr(channel, "out", None)) and bool(getattr(channel, "sends", True))


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
        tainted: bool = False,
        on_tainted: Literal["approve", "deny"] = "approve",
        in_tool_call: bool = True,
        approval_tokens: ApprovalTokens | None = None,
    ) -> None:
        self.channel = channel
        self._run = run
        self._effects = effects
        self._approvals = approvals
        self._source_address = source_address
        self._tainted = tainted
        self._on_tainted = on_tainted
        self._in_tool_call = in_tool_call
        self._approval_tokens = approval_tokens

    def _require_tool_call(self, what: str) -> None:
        """A send is an effect recorded by the tool call that makes it: none outside one (a factory)."""
        if not self._in_tool_call:
            raise InvalidRunStateError(
                f"{what} on channel {self.name!r} was called from the tools factory: send from inside a "
                "tool call, where the run records it"
            )

    @property
    def name(self) -> str:
        """The channel's name."""
        return self.channel.name

    def emit(
        self, body: str, *, title: str | None = None, key: str | None = None, address: str | None = None
    ) -> Coroutine[Any, Any, None]:
        """Sends a message once per key (await it); the address defaults to the run's source address.

        Once the run is tainted, a send anywhere but back to where the run came from (the source
        address on the source channel) or to the channel's own default address needs a person's
        approval, or is denied when the agent's trust says ``on_tainted="deny"``: untrusted content
        must not steer messages to new recipients.

        Raises:
            ChamviValidationError: no address: neither given, nor the run's source, nor a default.
            ToolDeniedError: the run is tainted and the send was denied.
            ChannelUnavailableError: the receiver may take it later (Temporal retries the call).
            ChannelDeliveryError: the receiver refused it for good (a tool error).
            InvalidRunStateError: outside a tool call (in the tools factory), at the call itself, so a
                factory (a plain function) hears it without awaiting anything.
        """
        self._require_tool_call("emit()")
        return self._emit(body, title, key, address)

    async def _emit(self, body: str, title: str | None, key: str | None, address: str | None) -> None:
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
        if self._tainted and target not in (self._source_address, self.channel.default_address):
            await self._gate(target, title, body)
        await self.channel.out(ChannelMessage(body=body, title=title, address=target, key=effect_key))
        await self._effects.record_now(effect_key, {"sent": True})

    async def _gate(self, target: str, title: str | None, body: str) -> None:
        what = f"a message through channel {self.name!r} to {target!r}"
        if self._on_tainted == "deny":
            raise ToolDeniedError(
                f"{what} was denied: the run read untrusted content, and this agent refuses sends "
                "to addresses other than the run's source or the channel's default from then on"
            )
        # the person answering reads where it goes and what it says in the body
        preview = "\n\n".join([f"To: {target}", *([title] if title else []), body])
        decision = request_approval(
            self._approvals,
            title=f"The run read untrusted content: send a message through channel {self.name!r}?",
            body=preview[:2000],
        )
        if not decision.approved:
            raise ToolDeniedError(f"{what} was denied: {decision.reason or 'nobody approved'}")

    def approve(
        self,
        *,
        title: str,
        body: str | None = None,
        address: str | None = None,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    ) -> Coroutine[Any, Any, ApprovalDecision]:
        """``approve()``, with the request delivered through this channel (once, with its deadline).

        Raises:
            InvalidRunStateError: outside a tool call (in the tools factory), at the call itself.
        """
        self._require_tool_call("approve()")
        return self._approve(title, body, address, timeout)

    async def _approve(
        self, title: str, body: str | None, address: str | None, timeout: timedelta
    ) -> ApprovalDecision:
        if not self._approvals.next_is_answered:
            await self.notify_approval(
                title=title, body=body, timeout=timeout, index=self._approvals.next_index, address=address
            )
        return request_approval(self._approvals, title=title, body=body, timeout=timeout)

    async def notify_approval(
        self,
        *,
        title: str,
        body: str | None,
        timeout: timedelta,
        index: int,
        address: str | None = None,
        required: bool = True,
    ) -> None:
        """Sends the review request of the call's ``index``-th approval, once per run.

        What waits, until when and how to answer; ``body`` is what the tool's author wrote, never
        the call's arguments. The key is the approval's, so the tool's own ``approve()`` through
        this channel and the run's generic notice are one message.

        With the worker's approval tokens (``chamvi.approval_tokens``), the message carries a token
        that answers this approval (the one this call is about to wait on) until its deadline, as a
        link to the approvals page when ``CHAMVI_PUBLIC_URL`` is set, else as a ``chamvi approve
        --token`` command; never through a channel marked ``untrusted``. A ``required`` request's
        token lets its holder see this title and body before answering; the run's own notice (not
        ``required``) says only which tool waits, and so does its token.

        Args:
            title: what waits.
            body: the tool author's text, if any.
            timeout: how long the run waits.
            index: which ``approve()`` of the call this is.
            address: where to; by default the run's source address, else the channel's default.
            required: False for the run's own notice, which a channel without an address or an
                ``out`` simply does not get.

        Raises:
            ChamviValidationError: required, and the channel has no address for the request.
            InvalidRunStateError: outside a tool call (in the tools factory).
        """
        self._require_tool_call("notify_approval()")
        target = address or self._source_address or self.channel.default_address
        if not required and (not target or not channel_sends(self.channel)):
            return
        if not target:
            raise ChamviValidationError(
                f"channel {self.name!r} has no address for the approval request: pass address= or give "
                "the channel a default address"
            )
        waits = self._approvals.waits
        # a request asked again for new arguments (waits past its index) is a new message, whose
        # token answers the new wait; otherwise the key is the one runs have always recorded
        which = f"{index}" if waits == index else f"{index}:{waits}"
        key = f"{self._run.run_id}:approval:{self._run.step}:{self._run.tool_call_id}:{which}"
        found, _ = await self._effects.lookup(key)
        if found:
            return
        until = datetime.now(UTC) + timeout
        run_id = self._run.run_id
        lines = [
            *([body] if body else []),
            f"Waiting for an answer until {until:%Y-%m-%d %H:%M} UTC.",
            *self._answer_by_token(until, required),
            f"Run {run_id} of agent {self._run.agent!r}: answer with `chamvi approve {run_id}` "
            f"(or `--deny`), or POST /runs/{run_id}/approve.",
        ]
        message = ChannelMessage(
            body="\n".join(lines), title=f"Approval needed: {title}", address=target, key=key
        )
        await self.channel.out(message)
        await self._effects.record_now(key, {"sent": True})

    def _answer_by_token(self, until: datetime, detail: bool) -> list[str]:
        """The line that answers by token (a link, else a command); none without a secret.

        None through an untrusted channel either: whoever can post there (who may have written what
        made the run ask) could answer with it, and the taint guard would guard nothing.
        """
        tokens = self._approval_tokens
        if tokens is None or getattr(self.channel, "untrusted", False):
            return []
        waiting_on = approval_id(self._run.step, self._run.tool_call_id, self._approvals.waits)
        token = tokens.issue(self._run.run_id, waiting_on, expires=until, detail=detail)
        link = tokens.link(token)
        if link is not None:
            return [f"Approve or deny: {link}"]
        return [f"Approve with `chamvi approve --token {token}` (or `--deny`)."]


class ChannelAccess:
    """``ctx.channels``: find the run's source channel or another registered one."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        run: RunContext,
        effects: EffectLedger,
        approvals: Approvals,
        *,
        tainted: bool = False,
        on_tainted: Literal["approve", "deny"] = "approve",
        in_tool_call: bool = True,
        approval_tokens: ApprovalTokens | None = None,
    ) -> None:
        self._channels = channels
        self._run = run
        self._effects = effects
        self._approvals = approvals
        self._tainted = tainted
        self._on_tainted = on_tainted
        self._in_tool_call = in_tool_call
        self._approval_tokens = approval_tokens

    def _handle(self, channel: Channel) -> ChannelHandle:
        trigger = self._run.trigger
        source = trigger.address if channel.name == trigger.channel else None
        return ChannelHandle(
            channel,
            self._run,
            self._effects,
            self._approvals,
            source,
            self._tainted,
            self._on_tainted,
            in_tool_call=self._in_tool_call,
            approval_tokens=self._approval_tokens,
        )

    def find_one(self, name: str | None = None) -> ChannelHandle | None:
        """The named channel, or without a name the run's source channel, if it can send.

        None when the app registers no such channel, when it has no ``out`` (it only receives, or a
        webhook channel has no URL), and without a name for a run that came from no channel.
        """
        target = name if name is not None else self._run.trigger.channel
        channel = self._channels.get(target) if target else None
        return self._handle(channel) if channel is not None and channel_sends(channel) else None

    def find_one_or_fail(self, name: str | None = None) -> ChannelHandle:
        """Like ``find_one``, but where it answers None this raises (a tool error).

        Raises:
            ChannelNotFoundError: ``channel_not_found``: no such channel, one that cannot send, or
                (without a name) a run that came from no channel. The message names the channels
                that can send.
        """
        handle = self.find_one(name)
        if handle is not None:
            return handle
        target = name if name is not None else self._run.trigger.channel
        senders = ", ".join(repr(n) for n, c in self._channels.items() if channel_sends(c)) or "none"
        if target is None:
            problem = "this run came from no channel: name the channel to send through"
        elif target in self._channels:
            problem = f"channel {target!r} cannot send (it has no out)"
        else:
            problem = f"no channel {target!r} is registered"
        raise ChannelNotFoundError(f"{problem}; the channels that can send are {senders}")

    def find(self) -> list[ChannelHandle]:
        """Every registered channel that can send."""
        return [self._handle(channel) for channel in self._channels.values() if channel_sends(channel)]
