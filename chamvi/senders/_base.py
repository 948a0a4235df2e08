"""The verifier protocol every webhook scheme speaks, and the checks the built-in ones share.

A scheme gets the raw request (:class:`WebhookRequest`: body bytes, headers, the channel's secrets,
the clock) and answers what it carries (:class:`WebhookEvent`: the sender's delivery id, the event
type, the payload), or an answer that starts nothing (:class:`WebhookAnswer`: a ping, a URL check),
or refuses by raising: :class:`~chamvi.errors.WebhookSignatureError` (401),
:class:`~chamvi.errors.StaleDeliveryError` (409), :class:`~chamvi.errors.ChamviValidationError` (422).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs

from chamvi.errors import ChamviValidationError, StaleDeliveryError, WebhookSignatureError

MAX_TIMESTAMP_DIGITS = 12
"""Unix seconds until the year 33658: more digits cannot be a time a sender signed at."""
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class WebhookRequest:
    """One inbound request, as a scheme verifies it.

    Attributes:
        channel: the receiving channel's name (for messages).
        headers: the request's headers, names in lower case.
        body: the raw body, exactly as received: every scheme signs these bytes.
        secrets: the channel's secrets, the current one first (several while a secret rotates).
        received_at: Unix seconds when the request arrived.
        tolerance: how far a signed timestamp may be from ``received_at``.
    """

    channel: str
    headers: Mapping[str, str]
    body: bytes
    secrets: tuple[str, ...]
    received_at: float
    tolerance: timedelta

    def header(self, name: str) -> str | None:
        """The header's value (any case of the name), None when absent or empty."""
        return self.headers.get(name.lower()) or None

    @property
    def media_type(self) -> str:
        """The ``Content-Type`` without its parameters, in lower case (``application/json``)."""
        return (self.header("content-type") or "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class WebhookEvent:
    """A verified delivery: what it starts runs with.

    Attributes:
        delivery: the sender's delivery id, shown in the answer (``X-GitHub-Delivery``,
            ``webhook-id``, Slack's ``event_id``, Stripe's event id).
        payload: the event, as JSON: the runs' trigger payload.
        event: the event type (``issues``, ``app_mention``, ``invoice.paid``), which subscription
            filters see as ``event.event``.
        address: where the event came from (the issue, the thread): replies go there by default.
        key: the idempotency key of the runs, when it is not ``delivery`` (a scheme whose delivery
            id is inside no signature keys runs by what is signed instead).
    """

    delivery: str
    payload: Any
    event: str | None = None
    address: str | None = None
    key: str | None = None

    @property
    def idempotency_key(self) -> str:
        """What the runs it starts are idempotent on: ``key``, else the delivery id."""
        return self.key or self.delivery


@dataclass(frozen=True)
class WebhookAnswer:
    """A verified request that starts no run, and what to answer it (GitHub's ``ping``, Slack's URL check).

    Attributes:
        body: the JSON to answer; None answers ``{"delivery": ..., "event": ..., "runs": []}``.
        status: the HTTP status.
        delivery: the delivery id, when the request had one.
        event: the event type, when the request had one.
    """

    body: Any = None
    status: int = 200
    delivery: str | None = None
    event: str | None = None


@runtime_checkable
class WebhookScheme(Protocol):
    """How one kind of sender signs: the public protocol for a scheme of your own.

    Example::

        class Acme:
            name = "acme"

            def verify(self, request: WebhookRequest) -> WebhookEvent:
                given = request.header("x-acme-signature") or ""
                if not any(hmac.compare_digest(given, acme_sign(s, request.body)) for s in request.secrets):
                    raise WebhookSignatureError("the X-Acme-Signature does not match the body")
                payload = json.loads(request.body)
                return WebhookEvent(delivery=payload["id"], event=payload["kind"], payload=payload)

        webhook_channel("acme", scheme=Acme(), secret=acme_secret)
    """

    @property
    def name(self) -> str:
        """The scheme's name, as errors and ``chamvi channels list`` show it."""
        ...

    def verify(self, request: WebhookRequest) -> WebhookEvent | WebhookAnswer:
        """Checks the request and reads the delivery out of it.

        Raises:
            WebhookSignatureError: no valid signature under any of the secrets (401).
            StaleDeliveryError: validly signed, outside the tolerance window (409).
            ChamviValidationError: signed, but not a delivery it can read (422).
        """
        ...


@runtime_checkable
class SigningScheme(WebhookScheme, Protocol):
    """A scheme that can also sign, so a channel's ``out`` POSTs to a ``url`` the way its receiver checks."""

    def sign(self, secret: str, body: bytes, *, delivery: str, timestamp: int) -> dict[str, str]:
        """The headers that sign ``body`` as ``delivery`` at ``timestamp`` under ``secret``."""
        ...


def hmac_sha256(key: bytes, data: bytes) -> bytes:
    """The HMAC-SHA256 of ``data`` under ``key``."""
    return hmac.new(key, data, hashlib.sha256).digest()


def any_matches(given: Iterable[str], expected: Iterable[str]) -> bool:
    """Whether one given signature equals one expected, each compared in constant time.

    Bytes, not str: ``compare_digest`` refuses str holding non-ASCII characters, which a header may carry.
    """
    wanted = [e.encode() for e in expected]
    return any(hmac.compare_digest(g.encode(), w) for g in given for w in wanted)


def check_window(request: WebhookRequest, stamp: str, scheme: str) -> None:
    """Refuses a signed timestamp outside the channel's window: a replayed old delivery.

    Call it after the signature matched (so an unsigned request is a 401, whatever its timestamp).

    Raises:
        WebhookSignatureError: the timestamp is not a whole number of seconds.
        StaleDeliveryError: it is more than the tolerance away from now.
    """
    window = request.tolerance.total_seconds()
    if not (stamp.isascii() and stamp.isdigit()):
        raise WebhookSignatureError(f"the {scheme} timestamp {stamp[:20]!r} is no Unix time in seconds")
    if len(stamp) > MAX_TIMESTAMP_DIGITS:
        raise StaleDeliveryError(
            f"the delivery's timestamp {stamp[:MAX_TIMESTAMP_DIGITS]}... is no time of channel "
            f"{request.channel!r}'s {window:g} s window: sign it again with the current Unix time in seconds"
        )
    age = int(request.received_at) - int(stamp)
    if abs(age) > window:
        signed = f"{age} s ago" if age > 0 else f"{-age} s in the future"
        raise StaleDeliveryError(
            f"the delivery was signed {signed}, outside channel {request.channel!r}'s "
            f"{window:g} s window: a replay of an old delivery, or a sender whose clock is off"
        )


def json_body(body: bytes) -> Any:
    """The body as JSON (None when empty).

    Raises:
        ChamviValidationError: it is not JSON (422).
    """
    try:
        return json.loads(body) if body else None
    except (ValueError, RecursionError) as error:
        raise ChamviValidationError(f"the body is not JSON: {type(error).__name__}: {error}") from None


def form_payload(body: bytes) -> Any:
    """The JSON in the ``payload`` field of a form-encoded body (GitHub's other content type).

    Raises:
        ChamviValidationError: no ``payload`` field, or one that is not JSON (422).
    """
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as error:
        raise ChamviValidationError(f"the form-encoded body cannot be read: {error}") from None
    values = fields.get("payload")
    if not values or len(values) != 1:
        raise ChamviValidationError("a form-encoded delivery must carry its JSON in one 'payload' field")
    return json_body(values[0].encode())


def type_of(payload: Any) -> str | None:
    """The payload's ``type`` field when it is a string (Standard Webhooks, Stripe, chamvi's own)."""
    value = payload.get("type") if isinstance(payload, dict) else None
    return value if isinstance(value, str) else None
