"""chamvi's own scheme: ``X-Chamvi-Timestamp``, ``X-Chamvi-Delivery``, ``X-Chamvi-Signature: v2=<hex>``.

The signature is the hex HMAC-SHA256, under the channel's secret, of ``"<timestamp>.<delivery>.<raw
body>"``: the delivery id is signed, so a captured request sent again under invented ids is refused
(401) rather than starting a run per id. The first version, ``sha256=`` over ``"<timestamp>.<raw
body>"``, left the id out; ``ChamviSignature(legacy=True)`` still takes it, keyed by its signature.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from chamvi._constants import (
    TRIGGER_KEY_MAX_LENGTH,
    WEBHOOK_DELIVERY_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
)
from chamvi.errors import ChamviValidationError, WebhookSignatureError
from chamvi.senders._base import WebhookEvent, WebhookRequest, any_matches, check_window, json_body, type_of

SIGNATURE_PREFIX = "v2="
"""chamvi's scheme: the delivery id is signed."""
LEGACY_SIGNATURE_PREFIX = "sha256="
"""The scheme's first version, which left the delivery id out (``legacy_signatures=True``)."""
MAX_DELIVERY_LENGTH = TRIGGER_KEY_MAX_LENGTH


def signature(secret: str, timestamp: int | str, delivery: str, body: bytes) -> str:
    """``v2=<hex>``: the HMAC-SHA256 of ``"<timestamp>.<delivery>.<body>"`` under ``secret``.

    The same as ``printf '%s.%s.%s' "$TS" "$ID" "$BODY" | openssl dgst -sha256 -hmac "$SECRET"``
    prints. The delivery id holds no ``.``, so the signed string reads one way only.
    """
    signed = f"{timestamp}.{delivery}.".encode() + body
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def legacy_signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """``sha256=<hex>``: the first version's HMAC-SHA256 of ``"<timestamp>.<body>"`` (no delivery id)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return LEGACY_SIGNATURE_PREFIX + digest


def signed_headers(
    secret: str, body: bytes, *, delivery: str, timestamp: int | None = None
) -> dict[str, str]:
    """The headers that sign ``body`` as ``delivery`` now (or at ``timestamp``), as a sender sends them."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return {
        WEBHOOK_TIMESTAMP_HEADER: str(stamp),
        WEBHOOK_DELIVERY_HEADER: delivery,
        WEBHOOK_SIGNATURE_HEADER: signature(secret, stamp, delivery, body),
    }


class ChamviSignature:
    """chamvi's own scheme (the module docstring); the default of ``webhook_channel``.

    Args:
        legacy: also take the first version's ``sha256=`` signatures (the delivery id unsigned); such a
            delivery's runs are keyed by its signature, not its unsigned id.
    """

    name = "chamvi"

    def __init__(self, *, legacy: bool = False) -> None:
        self.legacy = legacy

    def verify(self, request: WebhookRequest) -> WebhookEvent:
        """Checks the signature, then the timestamp, then the delivery id; reads the JSON body.

        Raises:
            WebhookSignatureError: a missing or wrong signature or timestamp, or a legacy signature
                the channel does not take (401).
            StaleDeliveryError: validly signed, outside the window (409).
            ChamviValidationError: no delivery id, one over 255 characters or holding ``.``, a body
                that is not JSON (422).
        """
        stamp = request.header(WEBHOOK_TIMESTAMP_HEADER)
        given = request.header(WEBHOOK_SIGNATURE_HEADER)
        delivery = request.header(WEBHOOK_DELIVERY_HEADER) or ""
        if not stamp or not given:
            raise WebhookSignatureError(
                f"missing {WEBHOOK_TIMESTAMP_HEADER} or {WEBHOOK_SIGNATURE_HEADER}: sign "
                f"'<timestamp>.<delivery>.<body>' with HMAC-SHA256 under the channel's secret"
            )
        legacy = given.startswith(LEGACY_SIGNATURE_PREFIX)
        if legacy and not self.legacy:
            raise WebhookSignatureError(
                f"a {LEGACY_SIGNATURE_PREFIX} signature leaves the delivery id unsigned, so channel "
                f"{request.channel!r} refuses it: sign '<timestamp>.<delivery>.<body>' and send "
                f"'{SIGNATURE_PREFIX}<hex>', or accept old senders while they move with "
                "webhook_channel(..., legacy_signatures=True)"
            )
        if legacy:
            expected = [legacy_signature(s, stamp, request.body) for s in request.secrets]
        else:
            expected = [signature(s, stamp, delivery, request.body) for s in request.secrets]
        if not (stamp.isascii() and stamp.isdigit()) or not any_matches([given], expected):
            raise WebhookSignatureError(
                f"the signature does not match the timestamp, delivery id and body for channel "
                f"{request.channel!r}"
            )
        check_window(request, stamp, self.name)
        key = None
        if legacy:
            # the id is unsigned: the signature, unique per timestamp and body, keys the runs instead
            key = "sha256-" + given.removeprefix(LEGACY_SIGNATURE_PREFIX)[:64]
            delivery = key
        elif not delivery:
            raise ChamviValidationError(f"missing {WEBHOOK_DELIVERY_HEADER}: send the delivery's unique id")
        elif len(delivery) > MAX_DELIVERY_LENGTH or "." in delivery:
            raise ChamviValidationError(
                f"{WEBHOOK_DELIVERY_HEADER} must be at most {MAX_DELIVERY_LENGTH} characters without '.' "
                f"(it is signed between dots), not {len(delivery)} characters"
                + (" holding '.'" if "." in delivery else "")
            )
        payload = json_body(request.body)
        return WebhookEvent(delivery=delivery, payload=payload, event=type_of(payload), key=key)

    def sign(self, secret: str, body: bytes, *, delivery: str, timestamp: int) -> dict[str, str]:
        """The ``X-Chamvi-*`` headers of ``body`` sent as ``delivery`` at ``timestamp``."""
        return signed_headers(secret, body, delivery=delivery, timestamp=timestamp)
