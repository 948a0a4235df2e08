"""The webhook channel: signed HTTP events in, signed JSON messages out.

Inbound, a sender POSTs an event to ``/channels/<name>/events`` on the HTTP API (``chamvi api`` or
``chamvi dev``) with three headers, chamvi's own scheme:

- ``X-Chamvi-Timestamp``: Unix seconds when it signed;
- ``X-Chamvi-Delivery``: its delivery id (at most 255 characters, no ``.``), the idempotency key of
  the runs the event starts (a redelivered event answers the same runs);
- ``X-Chamvi-Signature``: ``v2=`` and the hex HMAC-SHA256, under the channel's secret, of
  ``"<timestamp>.<delivery>.<raw body>"``: the delivery id is signed, so a captured request sent
  again under invented ids is refused (401) rather than starting a run per id.

The first version of the scheme, ``sha256=`` over ``"<timestamp>.<raw body>"``, left the delivery id
out. A channel refuses it (401, saying so) unless built with ``legacy_signatures=True``, for senders
that have not moved yet; then the idempotency key of such a delivery is its signature, not its
unsigned id, so the same signed request within the window answers the runs it started (a sender's
retry must send the same request again to be deduplicated).

A bad or missing signature answers 401, a timestamp outside the tolerance window 409 (a replayed old
delivery), a body over the channel's limit 413, an unknown channel 404, an event the dispatch route
would refuse (a body that is not JSON, nesting past 64 levels, a lone surrogate, NaN, a delivery id or
address over 255 characters) 422, and an accepted event 202 with the runs it started, one per
subscribed agent whose filter accepts it.

Outbound, ``out`` POSTs the message as JSON to the channel's ``url``, signed the same way, with the
message's effect key as the delivery id and in ``Idempotency-Key`` (the same on every retry, for the
receiver to dedupe). 408, 429 and 5xx (or no answer) are retried by Temporal with backoff; any other
4xx fails the emit as a tool error the model sees.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx

from chamvi.channels import ChannelMessage, validate_channel_name
from chamvi.constants import (
    TRIGGER_KEY_MAX_LENGTH,
    WEBHOOK_DELIVERY_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
)
from chamvi.errors import (
    ChamviValidationError,
    ChannelDeliveryError,
    ChannelUnavailableError,
    InvalidAgentDefinitionError,
    StaleDeliveryError,
    WebhookSignatureError,
)

DEFAULT_TOLERANCE = timedelta(minutes=5)
DEFAULT_WEBHOOK_BODY_LIMIT = 262_144
SIGNATURE_PREFIX = "v2="
"""chamvi's scheme: the delivery id is signed."""
LEGACY_SIGNATURE_PREFIX = "sha256="
"""The scheme's first version, which left the delivery id out (``legacy_signatures=True``)."""
MAX_DELIVERY_LENGTH = TRIGGER_KEY_MAX_LENGTH
_MAX_TIMESTAMP_DIGITS = 12
"""Unix seconds until the year 33658: more digits cannot be a time a sender signed at."""


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


def delivery_id(key: str) -> str:
    """The delivery id ``out`` sends for an effect key: the key itself when it can be one, else its hash."""
    if key and "." not in key and len(key) <= MAX_DELIVERY_LENGTH:
        return key
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class WebhookDelivery:
    """A verified inbound event."""

    delivery: str
    payload: Any
    address: str | None


class WebhookChannel:
    """A channel over HTTP: signed events in through the API, signed JSON out to ``url``.

    Build it with :func:`webhook_channel`.
    """

    def __init__(
        self,
        name: str,
        *,
        secret: str,
        url: str | None,
        default_address: str | None,
        untrusted: bool,
        tolerance: timedelta,
        body_limit: int,
        timeout: timedelta,
        address_of: Callable[[Any], str | None] | None,
        legacy_signatures: bool = False,
    ) -> None:
        validate_channel_name(name)
        if not isinstance(secret, str) or len(secret) < 16:
            raise InvalidAgentDefinitionError(
                f"webhook channel {name!r}: the secret must be a string of at least 16 characters"
            )
        if url is not None and not url.startswith(("http://", "https://")):
            raise InvalidAgentDefinitionError(f"webhook channel {name!r}: url {url!r} must be http(s)://...")
        if tolerance <= timedelta(0):
            raise InvalidAgentDefinitionError(f"webhook channel {name!r}: the tolerance must be positive")
        if body_limit < 1:
            raise InvalidAgentDefinitionError(f"webhook channel {name!r}: body_limit must be at least 1 byte")
        self.name = name
        self.default_address = default_address
        self.untrusted = untrusted
        self.url = url
        self.tolerance = tolerance
        self.body_limit = body_limit
        self.legacy_signatures = legacy_signatures
        self._secret = secret
        self._timeout = timeout
        self._address_of = address_of

    @property
    def sends(self) -> bool:
        """Whether ``out`` can deliver: only with a ``url``."""
        return self.url is not None

    def verify(self, headers: Mapping[str, str], body: bytes, now: float) -> WebhookDelivery:
        """Checks an inbound delivery's signature, then its timestamp, then its id and JSON body.

        Raises:
            WebhookSignatureError: a missing or wrong signature or timestamp header, or a legacy
                signature the channel does not take (401).
            StaleDeliveryError: validly signed, but outside the tolerance window: a replay (409).
            ChamviValidationError: no delivery id, one over 255 characters or holding a ``.``, or a body
                that is not JSON (422).
        """
        stamp = headers.get(WEBHOOK_TIMESTAMP_HEADER)
        given = headers.get(WEBHOOK_SIGNATURE_HEADER)
        delivery = headers.get(WEBHOOK_DELIVERY_HEADER) or ""
        if not stamp or not given:
            raise WebhookSignatureError(
                f"missing {WEBHOOK_TIMESTAMP_HEADER} or {WEBHOOK_SIGNATURE_HEADER}: sign "
                f"'<timestamp>.<delivery>.<body>' with HMAC-SHA256 under the channel's secret"
            )
        legacy = given.startswith(LEGACY_SIGNATURE_PREFIX)
        if legacy and not self.legacy_signatures:
            raise WebhookSignatureError(
                f"a {LEGACY_SIGNATURE_PREFIX} signature leaves the delivery id unsigned, so channel "
                f"{self.name!r} refuses it: sign '<timestamp>.<delivery>.<body>' and send "
                f"'{SIGNATURE_PREFIX}<hex>', or accept old senders while they move with "
                "webhook_channel(..., legacy_signatures=True)"
            )
        if legacy:
            expected = legacy_signature(self._secret, stamp, body)
        else:
            expected = signature(self._secret, stamp, delivery, body)
        # bytes: compare_digest refuses str with non-ASCII characters, which a header may carry
        matches = hmac.compare_digest(given.encode(), expected.encode())
        if not (stamp.isascii() and stamp.isdigit()) or not matches:
            raise WebhookSignatureError(
                f"the signature does not match the timestamp, delivery id and body for channel {self.name!r}"
            )
        window = self.tolerance.total_seconds()
        if len(stamp) > _MAX_TIMESTAMP_DIGITS:
            raise StaleDeliveryError(
                f"the delivery's timestamp {stamp[:_MAX_TIMESTAMP_DIGITS]}... is no time of channel "
                f"{self.name!r}'s {window:g} s window: sign it again with the current Unix time in seconds"
            )
        age = int(now) - int(stamp)
        if abs(age) > window:
            raise StaleDeliveryError(
                f"the delivery was signed {age:+d} s from now, outside channel {self.name!r}'s "
                f"{window:g} s window: sign it again with the current time"
            )
        if legacy:
            # the id is unsigned: the signature, unique per timestamp and body, keys the runs instead
            delivery = "sha256-" + given.removeprefix(LEGACY_SIGNATURE_PREFIX)[:64]
        elif not delivery:
            raise ChamviValidationError(f"missing {WEBHOOK_DELIVERY_HEADER}: send the delivery's unique id")
        elif len(delivery) > MAX_DELIVERY_LENGTH or "." in delivery:
            raise ChamviValidationError(
                f"{WEBHOOK_DELIVERY_HEADER} must be at most {MAX_DELIVERY_LENGTH} characters without '.' "
                f"(it is signed between dots), not {len(delivery)} characters"
                + (" holding '.'" if "." in delivery else "")
            )
        try:
            payload = json.loads(body) if body else None
        except (ValueError, RecursionError) as error:
            raise ChamviValidationError(f"the body is not JSON: {type(error).__name__}: {error}") from None
        try:
            address = self._address_of(payload) if self._address_of is not None else None
        except Exception as error:
            raise ChamviValidationError(
                f"channel {self.name!r} could not read the address of this event: "
                f"{type(error).__name__}: {error}"
            ) from None
        return WebhookDelivery(delivery=delivery, payload=payload, address=address)

    async def out(self, message: ChannelMessage) -> None:
        """POSTs the message as JSON to ``url``, signed, with its key as ``Idempotency-Key``.

        Raises:
            ChannelUnavailableError: 408, 429, 5xx or no answer: Temporal tries again.
            ChannelDeliveryError: another 4xx, or no ``url``: a tool error.
        """
        if self.url is None:
            raise ChannelDeliveryError(
                f"webhook channel {self.name!r} has no url to send to: give webhook_channel(url=...)"
            )
        body = json.dumps(
            {"address": message.address, "title": message.title, "body": message.body, "key": message.key}
        ).encode()
        headers = {
            "content-type": "application/json",
            "idempotency-key": message.key,
            **signed_headers(self._secret, body, delivery=delivery_id(message.key)),
        }
        try:
            async with httpx.AsyncClient(timeout=self._timeout.total_seconds()) as http:
                response = await http.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as error:
            raise ChannelUnavailableError(
                f"webhook channel {self.name!r} could not reach {self.url}: {type(error).__name__}: {error}"
            ) from None
        status = response.status_code
        if status < 300:
            return
        detail = f"webhook channel {self.name!r}: {self.url} answered {status}: {response.text[:200]}"
        if status in (408, 429) or status >= 500:
            raise ChannelUnavailableError(detail, retry_after=_retry_after(response))
        raise ChannelDeliveryError(detail)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else None


def webhook_channel(
    name: str,
    *,
    secret: str,
    url: str | None = None,
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
        secret: the shared HMAC secret, at least 16 characters (``CHAMVI_...`` from the environment).
        url: where ``out`` POSTs messages; without it the channel only receives.
        default_address: where a message goes when neither the tool nor the run names one.
        untrusted: a run it starts is tainted from its first step (the default: the sender is
            outside).
        tolerance: how far a delivery's timestamp may be from now.
        body_limit: the largest inbound body, in bytes (413 over it).
        timeout: how long one outbound POST may take.
        address_of: reads the address (the ticket, the thread) an event came from out of its payload,
            so a run's replies go back there.
        legacy_signatures: also take the scheme's first version (``sha256=`` over
            ``<timestamp>.<body>``, the delivery id unsigned) while senders move to ``v2=``; such a
            delivery's idempotency key is its signature.

    Raises:
        InvalidAgentDefinitionError: a bad name, a short secret, a url that is not http(s), a
            tolerance or body limit out of range.
    """
    return WebhookChannel(
        name,
        secret=secret,
        url=url,
        default_address=default_address,
        untrusted=untrusted,
        tolerance=tolerance,
        body_limit=body_limit,
        timeout=timeout,
        address_of=address_of,
        legacy_signatures=legacy_signatures,
    )
