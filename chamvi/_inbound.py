"""Inbound: how a channel starts runs, for every agent that subscribed to what it received.

A channel never picks an agent. It hands each delivery to its context (:class:`InboundContext`, the
``chamvi.channels.ChannelContext`` chamvi hands it), which starts one run per matching subscription
(or, for a subscription that routes events to conversations, sends the event as a message to its
conversation), with the channel and subscription on the trigger envelope and an idempotency key made
of the delivery's key and the subscription: the same delivery dispatched twice (a sender's retry, two
worker replicas polling the same source, two API replicas behind a balancer) starts each run once and
answers the same run ids.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from chamvi._constants import CHANNEL_INVOKER_KIND, CHANNEL_TRIGGER, TRIGGER_KEY_MAX_LENGTH
from chamvi.agents import Agent
from chamvi.channels import Channel, ChannelSubscription, InboundEvent, StartedRun
from chamvi.client import ChamviClient
from chamvi.errors import ChannelNotFoundError, InvalidInputError
from chamvi.models import Invoker, RunInput

DELIVERY_KEY_MAX_LENGTH = 128
"""A delivery key's longest form: it becomes part of an idempotency key (at most 255 characters),
beside a subscription id (at most 64) and a separator."""


def subscribers(agents: Mapping[str, Agent], event: InboundEvent) -> list[tuple[Agent, ChannelSubscription]]:
    """Every (agent, subscription) whose subscription accepts ``event``, in the app's agent order."""
    return [
        (agent, subscription)
        for agent in agents.values()
        for subscription in agent.channels
        if subscription.accepts(event)
    ]


def _check_delivery_key(key: str) -> None:
    if not isinstance(key, str) or not key or len(key) > DELIVERY_KEY_MAX_LENGTH or "\0" in key:
        raise InvalidInputError(
            f"delivery key {key!r} is invalid: use 1-{DELIVERY_KEY_MAX_LENGTH} characters without NUL"
        )


class InboundContext:
    """What a channel receives with: ``dispatch`` starts the runs one inbound delivery asks for.

    Args:
        channel: the channel's name; every run it starts records it as its ``channel``.
        agents: the app's agents, whose subscriptions decide who runs.
        runs: the client runs are started with.
    """

    def __init__(self, channel: str, agents: Mapping[str, Agent], runs: ChamviClient) -> None:
        self.channel = channel
        self._agents = agents
        self._runs = runs

    async def dispatch(
        self, payload: Any = None, *, key: str, address: str | None = None, event: str | None = None
    ) -> list[StartedRun]:
        """Starts a run of every subscribed agent whose filter accepts the delivery.

        Args:
            payload: the event, as JSON; the runs' trigger payload.
            key: the delivery's own id (a webhook's delivery id, a message id): the same key
                dispatched again answers the runs it started the first time.
            address: where the event came from on the channel (replies go there by default).
            event: the event's type (``issues``), on the runs' trigger and seen by subscription
                filters (``event.event``, ``ChannelSubscription(events=...)``).

        Returns:
            The runs, one per matching subscription; none when nobody subscribed or every filter
            declined.

        Raises:
            InvalidInputError: the key or the address is malformed, or the payload is not JSON.
            ChamviError: a subscription's filter raised (wrapped, naming the agent).
        """
        _check_delivery_key(key)
        if address is not None and (
            not isinstance(address, str) or not address or len(address) > TRIGGER_KEY_MAX_LENGTH
        ):
            raise InvalidInputError(
                f"address {address!r} is invalid: use 1-{TRIGGER_KEY_MAX_LENGTH} characters"
            )
        if event is not None and (
            not isinstance(event, str) or not event or len(event) > TRIGGER_KEY_MAX_LENGTH
        ):
            raise InvalidInputError(
                f"event type {event!r} is invalid: use 1-{TRIGGER_KEY_MAX_LENGTH} characters"
            )
        inbound = InboundEvent(channel=self.channel, key=key, payload=payload, address=address, event=event)
        try:
            matched = subscribers(self._agents, inbound)
        except Exception as error:
            raise InvalidInputError(
                f"a subscription filter on channel {self.channel!r} failed on delivery {key!r}: "
                f"{type(error).__name__}: {error}"
            ) from None
        return list(await asyncio.gather(*(self._start(agent, sub, inbound) for agent, sub in matched)))

    async def _start(
        self, agent: Agent, subscription: ChannelSubscription, event: InboundEvent
    ) -> StartedRun:
        idempotency_key = event.key if subscription.id is None else f"{event.key}:{subscription.id}"
        key = subscription.conversation(event) if subscription.conversation is not None else None
        if key is not None:
            # the delivery's key is the message id: a redelivery is the same turn
            sent = await self._runs.conversations.send(
                agent.name,
                subscription.message_text(event),
                conversation=f"{self.channel}:{key}",
                message_id=idempotency_key,
                invoker=Invoker(id=self.channel, kind=CHANNEL_INVOKER_KIND),
                channel=self.channel,
                address=event.address,
                subscription=subscription.id,
                reply=True,
            )
            return StartedRun(
                agent=agent.name,
                subscription=subscription.id,
                run_id=sent.run_id,
                created=sent.created,
                conversation=sent.conversation,
            )
        result = await self._runs.start(
            RunInput(
                agent=agent.name,
                payload=event.payload,
                trigger=CHANNEL_TRIGGER,
                channel=self.channel,
                subscription=subscription.id,
                address=event.address,
                event=event.event,
                invoker=Invoker(id=self.channel, kind=CHANNEL_INVOKER_KIND),
                idempotency_key=idempotency_key,
            )
        )
        return StartedRun(
            agent=agent.name, subscription=subscription.id, run_id=result.run_id, created=result.created
        )


def channel_context(
    channels: Mapping[str, Channel], name: str, agents: Mapping[str, Agent], runs: ChamviClient
) -> InboundContext:
    """The context of registered channel ``name``.

    Raises:
        ChannelNotFoundError: the app registers no such channel.
    """
    if name not in channels:
        known = ", ".join(repr(n) for n in channels) or "none"
        raise ChannelNotFoundError(f"unknown channel {name!r}: registered channels are {known}")
    return InboundContext(name, agents, runs)
