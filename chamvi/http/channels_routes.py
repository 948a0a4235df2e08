"""``/channels``: inbound webhook events, verified by their signature instead of a bearer token.

A sender holds the channel's secret, not an API token, so these routes declare no permission and
the bearer middleware lets them through; each request is authenticated by its signature here, in the
channel's scheme (chamvi's own, Standard Webhooks, GitHub, Slack, Stripe or a custom one).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from chamvi._constants import TRIGGER_KEY_MAX_LENGTH
from chamvi._inbound import InboundContext
from chamvi.agents import Agent
from chamvi.channels import Channel
from chamvi.client import ChamviClient
from chamvi.errors import ChamviValidationError, ChannelNotFoundError
from chamvi.http.errors import PAYLOAD_TOO_LARGE, ErrorResponse, error_responses
from chamvi.http.schemas import check_json
from chamvi.senders import WebhookAnswer, WebhookEvent
from chamvi.webhooks import WebhookChannel


class StartedRunOut(BaseModel):
    """One run an event started (or had started: a redelivery answers the same runs)."""

    agent: str
    subscription: str | None
    run_id: str
    created: bool
    conversation: str | None = None
    """The conversation a routing subscription sent the event to; the run is its turn."""


class ChannelEventOut(BaseModel):
    """What an accepted event started: one run per subscribed agent whose filter accepted it."""

    delivery: str
    event: str | None = None
    """The event's type, as its sender named it."""
    runs: list[StartedRunOut]


ChannelName = Annotated[str, Path(min_length=1, max_length=64, description="The webhook channel's name")]


def channels_router(
    channels: Mapping[str, Channel], agents: Mapping[str, Agent], runs: ChamviClient
) -> APIRouter:
    """The ``/channels/{name}/events`` route for the app's webhook channels.

    Args:
        channels: the app's channels; only webhook channels receive here.
        agents: the app's agents, whose subscriptions decide which runs an event starts.
        runs: the client runs are started with.
    """
    router = APIRouter(prefix="/channels", tags=["channels"])
    webhooks = {name: c for name, c in channels.items() if isinstance(c, WebhookChannel)}

    @router.post(
        "/{name}/events",
        status_code=202,
        response_model=ChannelEventOut,
        responses={
            200: {
                "model": ChannelEventOut,
                "description": "A redelivery (the runs this delivery started), or a request that starts "
                "nothing (GitHub's ping; Slack's URL check answers its challenge)",
            },
            **error_responses(401, 404, 409, 413, 422),
        },
        summary="Receive a webhook event",
    )
    async def receive_event(
        name: ChannelName, request: Request, response: Response
    ) -> ChannelEventOut | Response:
        """Verifies the signed event and starts a run of every subscribed agent; 202 with the runs.

        Signed in the channel's scheme: chamvi's own (`X-Chamvi-Timestamp`, `X-Chamvi-Delivery`,
        `X-Chamvi-Signature: v2=` HMAC-SHA256 of `<timestamp>.<delivery>.<body>`), Standard Webhooks
        (`webhook-id`, `webhook-timestamp`, `webhook-signature`), GitHub (`X-Hub-Signature-256`,
        `X-GitHub-Event`, `X-GitHub-Delivery`), Slack (`X-Slack-Signature`,
        `X-Slack-Request-Timestamp`) or Stripe (`Stripe-Signature`). The sender's delivery id is the
        idempotency key.
        """
        channel = webhooks.get(name)
        if channel is None:
            known = ", ".join(repr(n) for n in webhooks) or "none"
            raise ChannelNotFoundError(f"unknown webhook channel {name!r}: webhook channels are {known}")
        body = await request.body()
        if len(body) > channel.body_limit:
            return ErrorResponse(
                413,
                PAYLOAD_TOO_LARGE,
                f"the body is {len(body)} bytes, over channel {name!r}'s limit of {channel.body_limit}",
            )
        verified = channel.verify(request.headers, body, time.time())
        if isinstance(verified, WebhookAnswer):
            if verified.body is not None:
                return JSONResponse(verified.body, status_code=verified.status)
            response.status_code = verified.status
            return ChannelEventOut(delivery=verified.delivery or "", event=verified.event, runs=[])
        delivery = _valid(verified)
        started = await InboundContext(name, agents, runs).dispatch(
            delivery.payload, key=delivery.idempotency_key, address=delivery.address, event=delivery.event
        )
        if started and not any(run.created for run in started):
            response.status_code = 200
        return ChannelEventOut(
            delivery=delivery.delivery,
            event=delivery.event,
            runs=[
                StartedRunOut(
                    agent=r.agent,
                    subscription=r.subscription,
                    run_id=r.run_id,
                    created=r.created,
                    conversation=r.conversation,
                )
                for r in started
            ],
        )

    return router


def _valid(delivery: WebhookEvent) -> WebhookEvent:
    """Refuses what ``POST /runs`` refuses: the payload, the address and the key checked alike.

    Raises:
        ChamviValidationError: nesting past 64 levels, a lone surrogate, NaN or Infinity, an address
            over 255 characters (422).
    """
    try:
        check_json(delivery.payload, "the event")
        check_json(delivery.delivery, "the delivery id")
        if delivery.event is not None:
            check_json(delivery.event, "the event type")
        if delivery.address is not None:
            check_json(delivery.address, "the event's address")
    except ValueError as error:
        raise ChamviValidationError(f"{error}: the dispatch route refuses it alike") from None
    if delivery.address is not None and len(delivery.address) > TRIGGER_KEY_MAX_LENGTH:
        raise ChamviValidationError(
            f"the event's address is {len(delivery.address)} characters, over {TRIGGER_KEY_MAX_LENGTH}: "
            "have the channel's address_of answer a shorter one"
        )
    return delivery
