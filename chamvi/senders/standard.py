"""Standard Webhooks (standardwebhooks.com): ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``.

The signature is ``v1,<base64 HMAC-SHA256>`` of ``"<webhook-id>.<webhook-timestamp>.<raw body>"``,
keyed by the bytes of the base64 secret after its ``whsec_`` prefix. ``webhook-signature`` may hold
several space-separated signatures (a sender rotating its secret signs with both): one match is
enough; entries of other versions (``v1a``, asymmetric) are skipped. The id is signed and is the
idempotency key; the timestamp must be within 5 minutes (the channel's tolerance).

The algorithm is implemented here rather than through the reference library's ``Webhook.verify``:
that one fixes the tolerance at 5 minutes and reads the clock itself, checks the timestamp before
the signature (an unsigned, stale request would read as a replay rather than a 401), and raises
``ValueError`` on a malformed signature list. The tests sign with the reference library.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from chamvi.errors import InvalidAgentDefinitionError, WebhookSignatureError
from chamvi.senders._base import (
    WebhookEvent,
    WebhookRequest,
    check_window,
    hmac_sha256,
    json_body,
    type_of,
)

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret: the base64 after ``whsec_`` (the prefix optional).

    Raises:
        InvalidAgentDefinitionError: it is not base64, or decodes to nothing.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidAgentDefinitionError(
            "a Standard Webhooks secret is 'whsec_' and base64 (as the sender shows it): this one is "
            "not base64"
        ) from None
    if not key:
        raise InvalidAgentDefinitionError("a Standard Webhooks secret may not be empty")
    return key


def standard_signature(secret: str, delivery: str, timestamp: int | str, body: bytes) -> str:
    """``v1,<base64>``: the signature of ``body`` sent as ``delivery`` at ``timestamp``."""
    digest = hmac_sha256(secret_key(secret), f"{delivery}.{timestamp}.".encode() + body)
    return "v1," + base64.b64encode(digest).decode()


class StandardWebhooks:
    """The Standard Webhooks scheme (the module docstring): ``scheme="standard-webhooks"``."""

    name = "standard-webhooks"

    def check_secret(self, secret: str) -> None:
        """Refuses a secret that is not ``whsec_`` and base64, when the channel is defined.

        Raises:
            InvalidAgentDefinitionError: it is not.
        """
        secret_key(secret)

    def verify(self, request: WebhookRequest) -> WebhookEvent:
        """Checks one of the ``v1`` signatures, then the timestamp; the ``webhook-id`` is the delivery.

        Raises:
            WebhookSignatureError: a missing header, or no ``v1`` signature matches (401).
            StaleDeliveryError: validly signed, outside the window (409).
            ChamviValidationError: a body that is not JSON (422).
        """
        delivery = request.header(ID_HEADER)
        stamp = request.header(TIMESTAMP_HEADER)
        given = request.header(SIGNATURE_HEADER)
        if not (delivery and stamp and given):
            raise WebhookSignatureError(
                f"missing {ID_HEADER}, {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}: a Standard Webhooks "
                f"sender sends all three (channel {request.channel!r})"
            )
        signed = f"{delivery}.{stamp}.".encode() + request.body
        expected = [hmac_sha256(secret_key(s), signed) for s in request.secrets]
        if not any(_matches(entry, expected) for entry in given.split()):
            raise WebhookSignatureError(
                f"no v1 signature in {SIGNATURE_HEADER} matches the id, timestamp and body under channel "
                f"{request.channel!r}'s secret"
            )
        check_window(request, stamp, self.name)
        payload = json_body(request.body)
        return WebhookEvent(delivery=delivery, payload=payload, event=type_of(payload))

    def sign(self, secret: str, body: bytes, *, delivery: str, timestamp: int) -> dict[str, str]:
        """The three ``webhook-*`` headers of ``body`` sent as ``delivery`` at ``timestamp``."""
        return {
            ID_HEADER: delivery,
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: standard_signature(secret, delivery, timestamp, body),
        }


def _matches(entry: str, expected: list[bytes]) -> bool:
    version, _, encoded = entry.partition(",")
    if version != "v1" or not encoded:
        return False
    try:
        given = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return False
    return any(hmac.compare_digest(given, e) for e in expected)
