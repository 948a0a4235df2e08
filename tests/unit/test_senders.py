"""Each webhook scheme against its sender's own library: signed there, verified here (and back)."""

from __future__ import annotations

import base64
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pytest
import stripe
from slack_sdk.signature import SignatureVerifier
from standardwebhooks import Webhook

from chamvi import ChannelSubscription, WebhookEvent, WebhookRequest, WebhookScheme
from chamvi.channels import InboundEvent
from chamvi.cli.channels import describe_channels
from chamvi.errors import (
    ChamviValidationError,
    InvalidAgentDefinitionError,
    StaleDeliveryError,
    WebhookSignatureError,
)
from chamvi.senders import GitHubWebhooks, SlackEvents, StandardWebhooks, StripeWebhooks, WebhookAnswer
from chamvi.senders.github import github_signature, issue_address
from chamvi.settings import Settings
from chamvi.webhooks import webhook_channel
from tests.support.docs import blocks

WHSEC = "whsec_" + base64.b64encode(b"standard-webhooks-secret-bytes!!").decode()
OTHER_WHSEC = "whsec_" + base64.b64encode(b"another-standard-secret-bytes!!!").decode()
SECRET = "sender-secret-0123456789"
NOW = time.time()


def standard_headers(secret: str, msg_id: str, body: bytes, at: float = NOW) -> dict[str, str]:
    """What a Standard Webhooks sender sends, signed by the reference library."""
    stamp = datetime.fromtimestamp(int(at), tz=UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at)),
        "webhook-signature": Webhook(secret).sign(msg_id, stamp, body.decode()),
    }


def test_standard_webhooks_signed_by_the_reference_library_verify_with_the_id_as_delivery() -> None:
    channel = webhook_channel("hooks", scheme="standard-webhooks", secret=WHSEC)
    body = json.dumps({"type": "invoice.paid", "data": {"id": 1}}).encode()
    verified = channel.verify(standard_headers(WHSEC, "msg_1", body), body, NOW)
    assert isinstance(verified, WebhookEvent)
    assert (verified.delivery, verified.event, verified.payload["data"]) == (
        "msg_1",
        "invoice.paid",
        {"id": 1},
    )
    assert verified.idempotency_key == "msg_1"


def test_standard_webhooks_take_one_matching_signature_among_several_during_a_rotation() -> None:
    body = b'{"type": "a"}'
    old = standard_headers(OTHER_WHSEC, "msg_2", body)["webhook-signature"]
    new = standard_headers(WHSEC, "msg_2", body)
    rotating = {**new, "webhook-signature": f"v1a,ignored {old} v1,!!notbase64 {new['webhook-signature']}"}
    channel = webhook_channel("hooks", scheme="standard-webhooks", secret=WHSEC)
    assert isinstance(channel.verify(rotating, body, NOW), WebhookEvent)
    # the receiver rotates too: old and new secrets both verify
    both = webhook_channel("hooks", scheme="standard-webhooks", secret=[WHSEC, OTHER_WHSEC])
    assert isinstance(both.verify(standard_headers(OTHER_WHSEC, "msg_3", body), body, NOW), WebhookEvent)


def test_standard_webhooks_refuse_a_wrong_secret_a_stale_timestamp_and_a_new_id() -> None:
    channel = webhook_channel("hooks", scheme="standard-webhooks", secret=WHSEC)
    body = b'{"type": "a"}'
    with pytest.raises(WebhookSignatureError, match="no v1 signature"):
        channel.verify(standard_headers(OTHER_WHSEC, "msg_1", body), body, NOW)
    with pytest.raises(StaleDeliveryError, match="window"):
        channel.verify(standard_headers(WHSEC, "msg_1", body, at=NOW - 301), body, NOW)
    with pytest.raises(WebhookSignatureError):
        channel.verify({**standard_headers(WHSEC, "msg_1", body), "webhook-id": "msg_new"}, body, NOW)
    with pytest.raises(WebhookSignatureError, match="missing"):
        channel.verify({}, body, NOW)


def test_what_standard_webhooks_signs_the_reference_library_verifies() -> None:
    body = b'{"type": "chamvi.message"}'
    headers = StandardWebhooks().sign(WHSEC, body, delivery="msg_out", timestamp=int(time.time()))
    assert Webhook(WHSEC).verify(body, headers) == {"type": "chamvi.message"}


def test_a_standard_webhooks_secret_that_is_not_base64_is_refused_at_definition() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="not base64"):
        webhook_channel("hooks", scheme="standard-webhooks", secret="whsec_not*base64*at*all!!")


def github_headers(
    body: bytes, event: str = "issues", delivery: str = "guid-1", **extra: str
) -> dict[str, str]:
    return {
        "X-Hub-Signature-256": github_signature(SECRET, body),
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        **extra,
    }


ISSUE = {"action": "opened", "issue": {"number": 7}, "repository": {"full_name": "acme/app"}}


def test_github_reads_the_event_header_the_issue_address_and_keys_runs_by_the_signed_body() -> None:
    channel = webhook_channel("gh", scheme="github", secret=SECRET)
    body = json.dumps(ISSUE).encode()
    verified = channel.verify(github_headers(body), body, NOW)
    assert isinstance(verified, WebhookEvent)
    assert (verified.delivery, verified.event, verified.address) == ("guid-1", "issues", "acme/app#7")
    # the GUID is inside no signature: the same body under another GUID is the same runs
    again = channel.verify(github_headers(body, delivery="guid-invented"), body, NOW)
    assert isinstance(again, WebhookEvent) and again.idempotency_key == verified.idempotency_key
    by_guid = webhook_channel("gh", scheme=GitHubWebhooks(key="delivery"), secret=SECRET)
    keyed = by_guid.verify(github_headers(body), body, NOW)
    assert isinstance(keyed, WebhookEvent) and keyed.idempotency_key == "guid-1"


def test_github_form_encoded_deliveries_carry_the_json_in_payload_and_are_signed_as_sent() -> None:
    channel = webhook_channel("gh", scheme="github", secret=SECRET)
    body = ("payload=" + quote(json.dumps(ISSUE))).encode()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    verified = channel.verify(github_headers(body, **form), body, NOW)
    assert isinstance(verified, WebhookEvent) and verified.payload == ISSUE
    with pytest.raises(ChamviValidationError, match="payload"):
        other = b"data=1"
        channel.verify(github_headers(other, **form), other, NOW)


def test_a_github_ping_is_answered_and_a_wrong_or_missing_signature_refused() -> None:
    channel = webhook_channel("gh", scheme="github", secret=SECRET)
    body = b'{"zen": "Keep it logically awesome."}'
    answer = channel.verify(github_headers(body, event="ping", delivery="guid-ping"), body, NOW)
    assert answer == WebhookAnswer(delivery="guid-ping", event="ping")
    forged = {**github_headers(body), "X-Hub-Signature-256": github_signature("wrong-secret-0123456", body)}
    with pytest.raises(WebhookSignatureError, match="does not match"):
        channel.verify(forged, body, NOW)
    with pytest.raises(WebhookSignatureError, match="missing X-Hub-Signature-256"):
        channel.verify({"X-GitHub-Event": "issues"}, body, NOW)


@pytest.mark.parametrize(
    ("payload", "address"),
    [
        (ISSUE, "acme/app#7"),
        ({"number": 3, "pull_request": {}, "repository": {"full_name": "acme/app"}}, "acme/app#3"),
        ({"pull_request": {"number": 4}, "repository": {"full_name": "acme/app"}}, "acme/app#4"),
        ({"ref": "main", "repository": {"full_name": "acme/app"}}, None),
        ([], None),
    ],
    ids=["issue", "pull-request-number", "pull-request-object", "push", "not-an-object"],
)
def test_the_address_of_a_github_event_is_its_issue_or_pull_request(
    payload: Any, address: str | None
) -> None:
    assert issue_address(payload) == address


def slack_headers(body: bytes, at: float = NOW, secret: str = SECRET) -> dict[str, str]:
    """What Slack sends, signed by slack_sdk's own SignatureVerifier."""
    stamp = str(int(at))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}


def mention(event_id: str = "Ev1", **event: Any) -> bytes:
    inner = {"type": "app_mention", "channel": "C1", "ts": "1700000000.000100", "text": "hi", **event}
    return json.dumps({"type": "event_callback", "event_id": event_id, "event": inner}).encode()


def test_slack_events_signed_by_slack_sdk_verify_with_the_event_id_and_the_thread() -> None:
    channel = webhook_channel("slack", scheme="slack", secret=SECRET)
    verified = channel.verify(slack_headers(mention()), mention(), NOW)
    assert isinstance(verified, WebhookEvent)
    assert (verified.delivery, verified.event, verified.address) == (
        "Ev1",
        "app_mention",
        "C1:1700000000.000100",
    )
    threaded = mention("Ev2", thread_ts="1699999999.000001")
    reply = channel.verify(slack_headers(threaded), threaded, NOW)
    assert isinstance(reply, WebhookEvent) and reply.address == "C1:1699999999.000001"


def test_slack_answers_the_url_check_and_starts_nothing_for_bots_and_other_requests() -> None:
    channel = webhook_channel("slack", scheme="slack", secret=SECRET)
    check = json.dumps({"type": "url_verification", "challenge": "3eZbrw1a", "token": "x"}).encode()
    assert channel.verify(slack_headers(check), check, NOW) == WebhookAnswer(
        body={"challenge": "3eZbrw1a"}, event="url_verification"
    )
    bot = mention("Ev3", bot_id="B1")
    assert isinstance(channel.verify(slack_headers(bot), bot, NOW), WebhookAnswer)
    with_bots = webhook_channel("slack", scheme=SlackEvents(bots=True), secret=SECRET)
    assert isinstance(with_bots.verify(slack_headers(bot), bot, NOW), WebhookEvent)
    limited = b'{"type": "app_rate_limited"}'
    assert isinstance(channel.verify(slack_headers(limited), limited, NOW), WebhookAnswer)


def test_slack_refuses_a_wrong_secret_a_stale_timestamp_and_an_event_without_id() -> None:
    channel = webhook_channel("slack", scheme="slack", secret=SECRET)
    with pytest.raises(WebhookSignatureError, match="does not match"):
        channel.verify(slack_headers(mention(), secret="wrong-secret-0123456"), mention(), NOW)
    with pytest.raises(StaleDeliveryError):
        channel.verify(slack_headers(mention(), at=NOW - 301), mention(), NOW)
    no_id = b'{"type": "event_callback", "event": {"type": "message"}}'
    with pytest.raises(ChamviValidationError, match="event_id"):
        channel.verify(slack_headers(no_id), no_id, NOW)


def test_what_slack_signs_slack_sdk_verifies() -> None:
    body = mention()
    headers = SlackEvents().sign(SECRET, body, delivery="Ev1", timestamp=int(time.time()))
    assert SignatureVerifier(SECRET).is_valid_request(body, headers)


STRIPE_SECRET = "whsec_stripe0123456789abcdef"
EVENT = {"id": "evt_1", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}


def stripe_headers(body: bytes, at: float = NOW, secret: str = STRIPE_SECRET) -> dict[str, str]:
    """What Stripe sends, signed by stripe's own library."""
    header = stripe.WebhookSignature.generate_signature_header(body.decode(), secret, timestamp=int(at))
    return {"Stripe-Signature": header}


def test_stripe_events_signed_by_stripes_library_verify_with_the_event_id_and_type() -> None:
    channel = webhook_channel("billing", scheme="stripe", secret=STRIPE_SECRET)
    body = json.dumps(EVENT).encode()
    verified = channel.verify(stripe_headers(body), body, NOW)
    assert isinstance(verified, WebhookEvent)
    assert (verified.delivery, verified.event) == ("evt_1", "invoice.paid")
    # a rolling secret: Stripe signs with both, one v1 matching is enough
    old = stripe_headers(body, secret="whsec_old0123456789abcdef")["Stripe-Signature"].split(",")[1]
    rolling = {"Stripe-Signature": f"{stripe_headers(body)['Stripe-Signature']},{old},v0=ignored"}
    assert isinstance(channel.verify(rolling, body, NOW), WebhookEvent)


def test_stripe_refuses_a_wrong_secret_a_stale_timestamp_and_a_changed_id() -> None:
    channel = webhook_channel("billing", scheme="stripe", secret=STRIPE_SECRET)
    body = json.dumps(EVENT).encode()
    with pytest.raises(WebhookSignatureError, match="no v1 signature"):
        channel.verify(stripe_headers(body, secret="whsec_wrong0123456789abc"), body, NOW)
    with pytest.raises(StaleDeliveryError):
        channel.verify(stripe_headers(body, at=NOW - 301), body, NOW)
    changed = json.dumps({**EVENT, "id": "evt_new"}).encode()
    with pytest.raises(WebhookSignatureError):
        channel.verify(stripe_headers(body), changed, NOW)
    with pytest.raises(WebhookSignatureError, match="missing"):
        channel.verify({"Stripe-Signature": "garbage"}, body, NOW)


def test_what_stripe_signs_stripes_library_verifies() -> None:
    body = json.dumps(EVENT).encode()
    headers = StripeWebhooks().sign(STRIPE_SECRET, body, delivery="evt_1", timestamp=int(time.time()))
    assert stripe.WebhookSignature.verify_header(body, headers["Stripe-Signature"], STRIPE_SECRET, 300)


class Acme:
    """A scheme of one's own, through the public protocol only."""

    name = "acme"

    def verify(self, request: WebhookRequest) -> WebhookEvent:
        if request.header("X-Acme-Key") not in request.secrets:
            raise WebhookSignatureError("the X-Acme-Key is not the channel's secret")
        payload = json.loads(request.body)
        return WebhookEvent(delivery=payload["id"], event=payload["kind"], payload=payload)


def test_a_custom_scheme_speaks_the_public_protocol_and_its_refusals_carry_its_reason() -> None:
    assert isinstance(Acme(), WebhookScheme)
    channel = webhook_channel("acme", scheme=Acme(), secret=SECRET, address_of=lambda p: p["ticket"])
    body = b'{"id": "a-1", "kind": "ticket.opened", "ticket": "T-9"}'
    verified = channel.verify({"x-acme-key": SECRET}, body, NOW)
    assert verified == WebhookEvent(
        delivery="a-1", event="ticket.opened", address="T-9", payload=json.loads(body)
    )
    with pytest.raises(WebhookSignatureError, match="X-Acme-Key"):
        channel.verify({"x-acme-key": "nope"}, body, NOW)
    with pytest.raises(InvalidAgentDefinitionError, match="cannot sign"):
        webhook_channel("acme", scheme=Acme(), secret=SECRET, url="http://127.0.0.1:1/hook")


def test_a_scheme_is_named_or_an_object_and_legacy_signatures_are_chamvis_own() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="unknown scheme 'gitlab'"):
        webhook_channel("hooks", scheme="gitlab", secret=SECRET)
    with pytest.raises(InvalidAgentDefinitionError, match="verify"):
        webhook_channel("hooks", scheme=object(), secret=SECRET)  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="chamvi's own scheme only"):
        webhook_channel("hooks", scheme="github", secret=SECRET, legacy_signatures=True)


def test_a_long_delivery_id_keys_runs_by_its_digest_and_an_empty_one_is_refused() -> None:
    channel = webhook_channel("billing", scheme="stripe", secret=STRIPE_SECRET)
    body = json.dumps({**EVENT, "id": "evt_" + "x" * 200}).encode()
    verified = channel.verify(stripe_headers(body), body, NOW)
    assert isinstance(verified, WebhookEvent) and verified.idempotency_key.startswith("sha256-")
    empty = json.dumps({**EVENT, "id": ""}).encode()
    with pytest.raises(ChamviValidationError):
        channel.verify(stripe_headers(empty), empty, NOW)


def inbound(event: str | None, payload: Any = None) -> InboundEvent:
    return InboundEvent(channel="gh", key="k", payload=payload, event=event)


def test_subscriptions_filter_on_the_event_type_and_its_action() -> None:
    opened = inbound("issues", {"action": "opened"})
    by_type = ChannelSubscription("gh", events=["issues"])
    by_action = ChannelSubscription("gh", events=["issues.opened"])
    by_filter = ChannelSubscription(
        "gh", filter=lambda e: e.event == "issues" and e.payload["action"] == "opened"
    )
    assert all(s.accepts(opened) for s in (by_type, by_action, by_filter))
    closed = inbound("issues", {"action": "closed"})
    assert by_type.accepts(closed) and not by_action.accepts(closed) and not by_filter.accepts(closed)
    assert not by_type.accepts(inbound("pull_request", {"action": "opened"}))
    assert not by_type.accepts(inbound(None))
    with pytest.raises(InvalidAgentDefinitionError, match="list of event types"):
        ChannelSubscription("gh", events="issues")


def test_reply_tokens_and_api_urls_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {"GITHUB_TOKEN": "ghp_x", "GITHUB_API_URL": "http://127.0.0.1:9/api/", "SLACK_BOT_TOKEN": "xoxb-y"}
    )
    assert (settings.github_token, settings.github_api_url) == ("ghp_x", "http://127.0.0.1:9/api")
    assert (settings.slack_bot_token, settings.slack_api_url) == ("xoxb-y", "https://slack.com/api")
    assert Settings.from_env({}).github_api_url == "https://api.github.com"


def readme_blocks() -> list[str]:
    heading = "## Webhooks from GitHub, Slack, Stripe and Standard Webhooks senders"
    return [b.body for b in blocks("guides/channels.md", heading, lang="python")]


def test_the_readmes_sender_examples_build_their_channels_and_the_custom_scheme_verifies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("GITHUB_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET", "STRIPE_WEBHOOK_SECRET", "ACME_SECRET"):
        monkeypatch.setenv(variable, "readme-secret-0123456789")
    hooks, custom = readme_blocks()
    namespace: dict[str, Any] = {}
    exec(compile(hooks, "hooks.py", "exec"), namespace)
    app = namespace["app"]
    assert [c.scheme.name for c in app.channels.values()] == ["github", "slack", "stripe"]
    rows = {row["name"]: row for row in describe_channels(app)}
    assert rows["github"]["kind"] == "webhook (github)" and rows["github"]["outbound"]
    assert rows["github"]["subscribers"] == ["triage (opened) [events: issues.opened, pull_request.opened]"]
    assert not rows["billing"]["outbound"]
    exec(compile(custom, "acme.py", "exec"), namespace)
    acme = namespace["acme"]
    body = b'{"id": "a-1", "kind": "ticket.opened"}'
    signature = hmac.new(b"readme-secret-0123456789", body, "sha256").hexdigest()
    verified = acme.verify({"X-Acme-Signature": signature}, body, time.time())
    assert (verified.delivery, verified.event) == ("a-1", "ticket.opened")


def test_a_stale_timestamp_says_how_long_ago_it_was_signed_and_a_future_one_how_far_ahead() -> None:
    channel = webhook_channel("hooks", scheme="standard-webhooks", secret=WHSEC)
    body = b'{"type": "a"}'
    with pytest.raises(StaleDeliveryError, match="signed 600 s ago, outside channel 'hooks'"):
        channel.verify(standard_headers(WHSEC, "msg_1", body, at=NOW - 600), body, NOW)
    with pytest.raises(StaleDeliveryError, match="signed 400 s in the future"):
        channel.verify(standard_headers(WHSEC, "msg_1", body, at=NOW + 400), body, NOW)
