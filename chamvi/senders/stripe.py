"""Stripe: ``Stripe-Signature: t=<timestamp>,v1=<hex>[,v1=<hex>...]``.

Stripe signs ``"<t>.<raw body>"`` with HMAC-SHA256 under the endpoint's signing secret, used as it
is shown (``whsec_...``, the whole string is the key: unlike Standard Webhooks it is not decoded).
While a secret rolls, Stripe sends one ``v1`` per active secret: one match is enough; ``v0`` (test
mode's old scheme) is ignored. A ``t`` more than 5 minutes off (the channel's tolerance) is a replay
(409). The event's ``id`` (``evt_...``) is the delivery id, its ``type`` (``invoice.paid``) the event
type; both are in the signed body, so a captured request cannot be resent under another id.

The algorithm is implemented here (it is a few lines); the tests sign with Stripe's own library
(``stripe.WebhookSignature``), which would otherwise bring its whole API client.
"""

from __future__ import annotations

from chamvi.errors import ChamviValidationError, WebhookSignatureError
from chamvi.senders._base import (
    WebhookEvent,
    WebhookRequest,
    any_matches,
    check_window,
    hmac_sha256,
    json_body,
    type_of,
)

SIGNATURE_HEADER = "Stripe-Signature"


def stripe_signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """The hex ``v1`` signature of ``body`` at ``timestamp``."""
    return hmac_sha256(secret.encode(), f"{timestamp}.".encode() + body).hex()


def _parse(header: str) -> tuple[str | None, list[str]]:
    stamp: str | None = None
    signatures: list[str] = []
    for item in header.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep:
            continue
        if name == "t" and stamp is None:
            stamp = value
        elif name == "v1":
            signatures.append(value)
    return stamp, signatures


class StripeWebhooks:
    """Stripe's webhook scheme (the module docstring): ``webhook_channel(scheme="stripe")``."""

    name = "stripe"

    def verify(self, request: WebhookRequest) -> WebhookEvent:
        """Checks one of the ``v1`` signatures, then ``t``; the event's ``id`` is the delivery.

        Raises:
            WebhookSignatureError: no header, no ``t`` or ``v1`` in it, or no ``v1`` matches (401).
            StaleDeliveryError: validly signed, outside the window (409).
            ChamviValidationError: a body that is not a JSON event with an ``id`` (422).
        """
        header = request.header(SIGNATURE_HEADER)
        stamp, given = _parse(header or "")
        if not stamp or not given:
            raise WebhookSignatureError(
                f"missing {SIGNATURE_HEADER} or its t= and v1= parts: Stripe signs every event "
                f"(channel {request.channel!r})"
            )
        if not any_matches(given, [stripe_signature(s, stamp, request.body) for s in request.secrets]):
            raise WebhookSignatureError(
                f"no v1 signature in {SIGNATURE_HEADER} matches the timestamp and body under channel "
                f"{request.channel!r}'s signing secret"
            )
        check_window(request, stamp, self.name)
        payload = json_body(request.body)
        delivery = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(delivery, str) or not delivery:
            raise ChamviValidationError("a Stripe event carries its id (evt_...)")
        return WebhookEvent(delivery=delivery, payload=payload, event=type_of(payload))

    def sign(self, secret: str, body: bytes, *, delivery: str, timestamp: int) -> dict[str, str]:
        """The ``Stripe-Signature`` Stripe would send with ``body`` at ``timestamp`` (the id is inside)."""
        return {SIGNATURE_HEADER: f"t={timestamp},v1={stripe_signature(secret, timestamp, body)}"}
