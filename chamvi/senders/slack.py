"""Slack: Events API requests in (``X-Slack-Signature``), ``chat.postMessage`` in the event's thread out.

Inbound, Slack signs ``"v0:<X-Slack-Request-Timestamp>:<raw body>"`` with the app's signing secret:
``X-Slack-Signature: v0=<hex HMAC-SHA256>``; a timestamp more than 5 minutes off (the channel's
tolerance) is a replay (409). The ``url_verification`` request Slack sends when the Request URL is
set is answered with its challenge; an ``event_callback`` is a delivery whose id is its ``event_id``
and whose type is the inner event's (``app_mention``, ``message``). Slack retries a delivery it got
no quick 2xx for, with ``X-Slack-Retry-Num`` and a fresh signature, but the same ``event_id``: the
retry answers the runs the first attempt started. The ``event_id`` is in the signed body, so a
captured request cannot be resent under another. Events a bot posted (``bot_id``, such as the
agent's own replies) start nothing unless ``SlackEvents(bots=True)``, so an agent does not answer
itself forever.

Outbound, :class:`SlackMessages` posts to the address ``<channel id>:<thread ts>`` (a thread) or
``<channel id>`` with ``chat.postMessage``: a run started by a mention answers in its thread. Each
message carries the emit's effect key in its metadata; a retried attempt reads the thread first and
posts nothing when a crashed attempt's message is there.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from temporalio import activity

from chamvi.channels import ChannelMessage
from chamvi.errors import (
    ChamviValidationError,
    ChannelDeliveryError,
    ChannelUnavailableError,
    WebhookSignatureError,
)
from chamvi.senders import _http
from chamvi.senders._base import (
    WebhookAnswer,
    WebhookEvent,
    WebhookRequest,
    any_matches,
    check_window,
    json_body,
)
from chamvi.settings import Settings

SIGNATURE_HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
RETRY_HEADER = "X-Slack-Retry-Num"
METADATA_EVENT = "chamvi_effect"
"""The metadata type of each message posted, its payload the emit's effect key (found again on a retry)."""
_TEMPORARY_ERRORS = frozenset(
    {"ratelimited", "service_unavailable", "internal_error", "fatal_error", "request_timeout"}
)


def slack_signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """``v0=<hex>``: what Slack sends in ``X-Slack-Signature`` for ``body`` at ``timestamp``."""
    signed = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def thread_address(event: Any) -> str | None:
    """``<channel>:<thread ts>`` of the thread an event is in (or starts), when it is in a channel."""
    if not isinstance(event, dict):
        return None
    channel, ts = event.get("channel"), event.get("thread_ts") or event.get("ts")
    return f"{channel}:{ts}" if isinstance(channel, str) and isinstance(ts, str) else None


class SlackEvents:
    """Slack's Events API scheme (the module docstring): ``webhook_channel(scheme="slack")``.

    Args:
        bots: also start runs for events a bot posted (the agent's own replies among them).
    """

    name = "slack"

    def __init__(self, *, bots: bool = False) -> None:
        self.bots = bots

    def verify(self, request: WebhookRequest) -> WebhookEvent | WebhookAnswer:
        """Checks the ``v0`` signature, then the timestamp; answers a URL check; reads an event.

        Raises:
            WebhookSignatureError: a missing or wrong signature (401).
            StaleDeliveryError: validly signed, outside the window (409).
            ChamviValidationError: a body that is not JSON, an event without an ``event_id`` (422).
        """
        stamp = request.header(TIMESTAMP_HEADER)
        given = request.header(SIGNATURE_HEADER)
        if not stamp or not given:
            raise WebhookSignatureError(
                f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}: Slack signs every Events API "
                f"request (channel {request.channel!r})"
            )
        if not any_matches([given], [slack_signature(s, stamp, request.body) for s in request.secrets]):
            raise WebhookSignatureError(
                f"the {SIGNATURE_HEADER} does not match the timestamp and body under channel "
                f"{request.channel!r}'s signing secret"
            )
        check_window(request, stamp, self.name)
        payload = json_body(request.body)
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind == "url_verification":
            return WebhookAnswer(body={"challenge": payload.get("challenge")}, event=kind)
        if kind != "event_callback":
            return WebhookAnswer(event=kind if isinstance(kind, str) else None)
        assert isinstance(payload, dict)
        delivery = payload.get("event_id")
        if not isinstance(delivery, str) or not delivery:
            raise ChamviValidationError("a Slack event_callback carries its event_id")
        inner = payload.get("event")
        event = inner.get("type") if isinstance(inner, dict) else None
        event = event if isinstance(event, str) else None
        if (
            not self.bots
            and isinstance(inner, dict)
            and (inner.get("bot_id") or inner.get("subtype") == "bot_message")
        ):
            return WebhookAnswer(delivery=delivery, event=event)
        return WebhookEvent(delivery=delivery, payload=payload, event=event, address=thread_address(inner))

    def sign(self, secret: str, body: bytes, *, delivery: str, timestamp: int) -> dict[str, str]:
        """The headers Slack would send with ``body`` at ``timestamp`` (the id is in the body)."""
        return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: slack_signature(secret, timestamp, body)}


class SlackMessages(_http.ApiReply):
    """Replies with ``chat.postMessage`` to ``<channel id>:<thread ts>`` (in the thread) or ``<channel id>``.

    Give it to ``webhook_channel(..., scheme="slack", reply=SlackMessages())``: a run started by a
    mention answers in the mention's thread.

    Args:
        token: the bot token (``xoxb-...``); None reads ``SLACK_BOT_TOKEN`` (through ``settings``).
        api_url: Slack's Web API; None reads ``SLACK_API_URL`` (default ``https://slack.com/api``).
        settings: where ``token`` and ``api_url`` come from when not given; None reads the
            environment on the first send.
        timeout: how long one API call may take.
    """

    service = "Slack's Web API"
    token_variable = "SLACK_BOT_TOKEN"

    def configured(self, settings: Settings) -> tuple[str | None, str]:
        """The token and base URL from ``settings`` (``SLACK_BOT_TOKEN``)."""
        return settings.slack_bot_token, settings.slack_api_url

    async def send(self, message: ChannelMessage, *, channel: str) -> None:
        """Posts the message in the address's thread.

        Raises:
            ChannelUnavailableError: 408, 429, 5xx, a temporary Slack error or no answer: Temporal
                tries again.
            ChannelDeliveryError: no token, or Slack refused the message (``not_in_channel``, ...): a
                tool error.
        """
        token, api_url = self.config(channel)
        target, _, thread = message.address.partition(":")
        if not target:
            raise ChannelDeliveryError(
                f"channel {channel!r}: address {message.address!r} names no Slack channel: write "
                "<channel id> or <channel id>:<thread ts>"
            )
        retried = activity.in_activity() and activity.info().attempt > 1
        if retried and await self.find(message.address, message.key, channel=channel) is not None:
            return
        text = "\n".join([*([f"*{message.title}*"] if message.title else []), message.body])
        body: dict[str, Any] = {
            "channel": target,
            "text": text,
            "metadata": {"event_type": METADATA_EVENT, "event_payload": {"key": message.key}},
        }
        if thread:
            body["thread_ts"] = thread
        what = f"channel {channel!r}: Slack's chat.postMessage to {message.address}"
        response = await _http.send(
            "POST",
            f"{api_url}/chat.postMessage",
            what=what,
            timeout=self.timeout,
            headers={"authorization": f"Bearer {token}", "content-type": "application/json; charset=utf-8"},
            json=body,
        )
        try:
            answer = response.json()
        except ValueError:
            raise ChannelUnavailableError(f"{what} answered no JSON: {response.text[:200]}") from None
        if isinstance(answer, dict) and answer.get("ok") is True:
            return
        error = answer.get("error") if isinstance(answer, dict) else None
        detail = f"{what}: Slack answered {error or answer!r}"
        if error in _TEMPORARY_ERRORS:
            raise ChannelUnavailableError(detail, retry_after=_http.retry_after(response))
        raise ChannelDeliveryError(detail)

    async def find(self, address: str, key: str, *, channel: str = "slack") -> dict[str, Any] | None:
        """The message at ``address`` (its thread's replies, or the channel's newest) carrying ``key``.

        Each message is posted with ``key`` in its metadata; reading it back needs the
        ``channels:history`` (or ``groups:history``, ``im:history``) scope. Without it, or when Slack
        refuses the read, this answers None and the retry posts: a second message rather than none.

        Raises:
            ChannelUnavailableError: Slack could not answer now.
        """
        token, api_url = self.config(channel)
        target, _, thread = address.partition(":")
        method, params = ("conversations.history", {"channel": target, "limit": "50"})
        if thread:
            method, params = ("conversations.replies", {"channel": target, "ts": thread, "limit": "200"})
        try:
            response = await _http.send(
                "GET",
                f"{api_url}/{method}",
                what=f"channel {channel!r}: Slack's {method} of {address}",
                timeout=self.timeout,
                headers={"authorization": f"Bearer {token}"},
                params={**params, "include_all_metadata": "true"},
            )
            answer = response.json()
        except (ChannelDeliveryError, ValueError):
            return None
        messages = answer.get("messages") if isinstance(answer, dict) else None
        for found in messages if isinstance(messages, list) else []:
            if not isinstance(found, dict):
                continue
            metadata = found.get("metadata")
            payload = metadata.get("event_payload") if isinstance(metadata, dict) else None
            if isinstance(payload, dict) and payload.get("key") == key:
                return dict(found)
        return None
