"""The webhook channel: signed HTTP events in, replies out where they came from.

Inbound, a sender POSTs an event to ``/channels/<name>/events`` on the HTTP API (``chamvi api`` or
``chamvi dev``), signed in the channel's scheme (``chamvi.senders``): chamvi's own by default
(``X-Chamvi-Timestamp``, ``X-Chamvi-Delivery``, ``X-Chamvi-Signature: v2=`` over
``"<timestamp>.<delivery>.<raw body>"``), or Standard Webhooks, GitHub, Slack, Stripe, or a scheme of
your own (:class:`~chamvi.senders.WebhookScheme`). The sender's delivery id is the idempotency key
of the runs the event starts, so a redelivered event answers the same runs.

A bad or missing signature answers 401, a timestamp outside the tolerance window 409 (a replayed old
delivery), a body over the channel's limit 413, an unknown channel 404, an event the dispatch route
would refuse (a body that is not JSON, nesting past 64 levels, a lone surrogate, NaN, a delivery id or
address over 255 characters) 422, a request that starts nothing by its nature (GitHub's ``ping``,
Slack's URL check) 200, and an accepted event 202 with the runs it started, one per subscribed agent
whose filter accepts it.

Outbound, ``out`` goes through the channel's ``reply`` when it has one (``GitHubComments``: a comment
on the issue; ``SlackMessages``: a message in the thread), else POSTs the message as JSON to the
channel's ``url``, signed in the channel's scheme (chamvi's own or Standard Webhooks), with the
message's effect key as the delivery id and in ``Idempotency-Key`` (the same on every retry, for the
receiver to dedupe). 408, 429 and 5xx (or no answer) are retried by Temporal with backoff; any other
4xx fails the emit as a tool error the model sees.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from chamvi._inbound import DELIVERY_KEY_MAX_LENGTH
from chamvi.channels import ChannelMessage, validate_channel_name
from chamvi.errors import (
    ChamviValidationError,
    ChannelDeliveryError,
    InvalidAgentDefinitionError,
)
from chamvi.senders import (
    ChamviSignature,
    SigningScheme,
    WebhookAnswer,
    WebhookEvent,
    WebhookRequest,
    WebhookScheme,
    _http,
    scheme_named,
)
from chamvi.senders.own import (
    LEGACY_SIGNATURE_PREFIX,
    MAX_DELIVERY_LENGTH,
    SIGNATURE_PREFIX,
    legacy_signature,
    signature,
    signed_headers,
)

DEFAULT_TOLERANCE = timedelta(minutes=5)
DEFAULT_WEBHOOK_BODY_LIMIT = 262_144
WebhookDelivery = WebhookEvent
"""A verified inbound event (the name before schemes)."""

__all__ = [
    "DEFAULT_TOLERANCE",
    "DEFAULT_WEBHOOK_BODY_LIMIT",
    "LEGACY_SIGNATURE_PREFIX",
    "MAX_DELIVERY_LENGTH",
    "SIGNATURE_PREFIX",
    "WebhookChannel",
    "WebhookDelivery",
    "WebhookReply",
    "delivery_id",
    "legacy_signature",
    "signature",
    "signed_headers",
    "webhook_channel",
]


def delivery_id(key: str) -> str:
    """The delivery id ``out`` sends for an effect key: the key itself when it can be one, else its hash."""
    if key and "." not in key and len(key) <= MAX_DELIVERY_LENGTH:
        return key
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()


@runtime_checkable
class WebhookReply(Protocol):
    """Where a webhook channel's ``out`` sends instead of a url: ``GitHubComments``, ``SlackMessages``."""

    async def send(self, message: ChannelMessage, *, channel: str) -> None:
        """Delivers one message to ``message.address``; ``message.key`` is the same on a retry.

        Raises:
            ChannelUnavailableError: the other side may take it later (Temporal retries).
            ChannelDeliveryError: it refused the message for good (a tool error).
        """
        ...


class WebhookChannel:
    """A channel over HTTP: signed events in through the API, replies out.

    Build it with :func:`webhook_channel`.
    """

    def __init__(
        self,
        name: str,
        *,
        secret: str | Sequence[str],
        scheme: str | WebhookScheme = "chamvi",
        url: str | None,
        reply: WebhookReply | None = None,
        default_address: str | None,
        untrusted: bool,
        tolerance: timedelta,
        body_limit: int,
        timeout: timedelta,
        address_of: Callable[[Any], str | None] | None,
        legacy_signatures: bool = False,
    ) -> None:
        validate_channel_name(name)
        secrets = (secret,) if isinstance(secret, str) else tuple(secret)
        if not secrets or not all(isinstance(s, str) and len(s) >= 16 for s in secrets):
            raise InvalidAgentDefinitionError(
                f"webhook channel {name!r}: the secret must be a string of at least 16 characters "
                "(or a list of them while one rotates)"
            )
        if legacy_signatures and scheme not in ("chamvi", None) and not isinstance(scheme, ChamviSignature):
            raise InvalidAgentDefinitionError(
                f"webhook channel {name!r}: legacy_signatures=True is for chamvi's own scheme only"
            )
        verifier = ChamviSignature(legacy=True) if legacy_signatures else scheme_named(scheme, name)
        check_secret = getattr(verifier, "check_secret", None)
        if callable(check_secret):
            for s in secrets:
                try:
                    check_secret(s)
                except InvalidAgentDefinitionError as error:
                    raise InvalidAgentDefinitionError(f"webhook channel {name!r}: {error.message}") from None
        if url is not None and not url.startswith(("http://", "https://")):
            raise InvalidAgentDefinitionError(f"webhook channel {name!r}: url {url!r} must be http(s)://...")
        if url is not None and reply is not None:
            raise InvalidAgentDefinitionError(
                f"webhook channel {name!r}: give url= (POST signed JSON) or reply= (answer where the "
                "event came from), not both"
            )
        if url is not None and not isinstance(verifier, SigningScheme):
            raise InvalidAgentDefinitionError(
                f"webhook channel {name!r}: scheme {verifier.name!r} cannot sign what out POSTs to url=: "
                "give reply=... instead, or a scheme with sign()"
            )
        if reply is not None and not isinstance(reply, WebhookReply):
            raise InvalidAgentDefinitionError(
                f"webhook channel {name!r}: reply {reply!r} has no send(message, channel=...)"
            )
        if tolerance <= timedelta(0):
            raise InvalidAgentDefinitionError(f"webhook channel {name!r}: the tolerance must be positive")
        if body_limit < 1:
            raise InvalidAgentDefinitionError(f"webhook channel {name!r}: body_limit must be at least 1 byte")
        self.name = name
        self.scheme: WebhookScheme = verifier
        self.default_address = default_address
        self.untrusted = untrusted
        self.url = url
        self.reply = reply
        self.tolerance = tolerance
        self.body_limit = body_limit
        self.legacy_signatures = legacy_signatures
        self._secrets = secrets
        self._timeout = timeout
        self._address_of = address_of

    @property
    def sends(self) -> bool:
        """Whether ``out`` can deliver: only with a ``url`` or a ``reply``."""
        return self.url is not None or self.reply is not None

    def verify(self, headers: Mapping[str, str], body: bytes, now: float) -> WebhookEvent | WebhookAnswer:
        """Checks an inbound delivery in the channel's scheme and reads its id, type, payload and address.

        Raises:
            WebhookSignatureError: a missing or wrong signature (401).
            StaleDeliveryError: validly signed, but outside the tolerance window: a replay (409).
            ChamviValidationError: no delivery id or one over 255 characters, a body that is not
                JSON, an address ``address_of`` cannot read (422).
        """
        request = WebhookRequest(
            channel=self.name,
            headers={k.lower(): v for k, v in headers.items()},
            body=body,
            secrets=self._secrets,
            received_at=now,
            tolerance=self.tolerance,
        )
        verified = self.scheme.verify(request)
        if isinstance(verified, WebhookAnswer):
            return verified
        delivery = verified.delivery
        if (
            not isinstance(delivery, str)
            or not delivery
            or len(delivery) > MAX_DELIVERY_LENGTH
            or "\0" in delivery
        ):
            raise ChamviValidationError(
                f"the delivery id must be 1-{MAX_DELIVERY_LENGTH} characters without NUL, not "
                f"{len(delivery) if isinstance(delivery, str) else type(delivery).__name__}"
            )
        address = verified.address
        if self._address_of is not None:
            try:
                address = self._address_of(verified.payload)
            except Exception as error:
                raise ChamviValidationError(
                    f"channel {self.name!r} could not read the address of this event: "
                    f"{type(error).__name__}: {error}"
                ) from None
        key = verified.idempotency_key
        if len(key) > DELIVERY_KEY_MAX_LENGTH or "\0" in key:
            key = "sha256-" + hashlib.sha256(key.encode()).hexdigest()
        return WebhookEvent(
            delivery=delivery,
            payload=verified.payload,
            event=verified.event,
            address=address,
            key=None if key == delivery else key,
        )

    async def out(self, message: ChannelMessage) -> None:
        """Sends the message through ``reply``, or POSTs it as signed JSON to ``url``.

        Raises:
            ChannelUnavailableError: 408, 429, 5xx or no answer: Temporal tries again.
            ChannelDeliveryError: another 4xx, or neither ``reply`` nor ``url``: a tool error.
        """
        if self.reply is not None:
            await self.reply.send(message, channel=self.name)
            return
        if self.url is None or not isinstance(self.scheme, SigningScheme):
            raise ChannelDeliveryError(
                f"webhook channel {self.name!r} has nowhere to send: give webhook_channel(url=...) or "
                "reply=..."
            )
        body = json.dumps(
            {"address": message.address, "title": message.title, "body": message.body, "key": message.key}
        ).encode()
        signed = self.scheme.sign(
            self._secrets[0], body, delivery=delivery_id(message.key), timestamp=int(time.time())
        )
        await _http.send(
            "POST",
            self.url,
            what=f"webhook channel {self.name!r}: {self.url}",
            timeout=self._timeout,
            headers={"content-type": "application/json", "idempotency-key": message.key, **signed},
            content=body,
        )


def webhook_channel(
    name: str,
    *,
    secret: str | Sequence[str],
    scheme: str | WebhookScheme = "chamvi",
    url: str | None = None,
    reply: WebhookReply | None = None,
    default_address: str | None = None,
    untrusted: bool = True,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    body_limit: int = DEFAULT_WEBHOOK_BODY_LIMIT,
    timeout: timedelta = timedelta(seconds=10),
    address_of: Callable[[Any], str | None] | None = None,
    legacy_signatures: bool = False,
) -> WebhookChannel:
    """A webhook channel (see the module docstring).

    Args:
        name: the channel's name (the agent-name rule); its route is ``/channels/<name>/events``.
        secret: the shared secret, at least 16 characters (from the environment); a list while it
            rotates (the first signs what ``out`` sends, any verifies). Standard Webhooks: the
            ``whsec_...`` the sender shows; GitHub: the webhook's secret; Slack: the app's signing
            secret; Stripe: the endpoint's signing secret.
        scheme: how senders sign: ``"chamvi"`` (the default), ``"standard-webhooks"``, ``"github"``,
            ``"slack"``, ``"stripe"``, or an object speaking :class:`~chamvi.senders.WebhookScheme`.
        url: where ``out`` POSTs messages, signed in the scheme (chamvi's or Standard Webhooks');
            without it or ``reply`` the channel only receives.
        reply: where ``out`` sends instead: ``GitHubComments()``, ``SlackMessages()``, or your own
            :class:`WebhookReply`.
        default_address: where a message goes when neither the tool nor the run names one.
        untrusted: a run it starts is tainted from its first step (the default: the sender is
            outside).
        tolerance: how far a delivery's signed timestamp may be from now.
        body_limit: the largest inbound body, in bytes (413 over it).
        timeout: how long one outbound POST may take.
        address_of: reads the address (the ticket, the thread) an event came from out of its payload,
            so a run's replies go back there; GitHub and Slack find theirs without it.
        legacy_signatures: chamvi's scheme only: also take its first version (``sha256=`` over
            ``<timestamp>.<body>``, the delivery id unsigned) while senders move to ``v2=``; such a
            delivery's idempotency key is its signature.

    Raises:
        InvalidAgentDefinitionError: a bad name, a short secret (or one the scheme cannot read), an
            unknown scheme, a url that is not http(s) or that the scheme cannot sign for, both url and
            reply, a tolerance or body limit out of range.
    """
    return WebhookChannel(
        name,
        secret=secret,
        scheme=scheme,
        url=url,
        reply=reply,
        default_address=default_address,
        untrusted=untrusted,
        tolerance=tolerance,
        body_limit=body_limit,
        timeout=timeout,
        address_of=address_of,
        legacy_signatures=legacy_signatures,
    )
