"""Channels without a server: webhook signatures, subscriptions, gated emits, emits recorded at once."""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import timedelta

import pytest

from chamvi import (
    AgentTrust,
    App,
    ChannelSubscription,
    ToolContext,
    TriggerEnvelope,
    WebhookEvent,
    define_agent,
    tool,
)
from chamvi._constants import WEBHOOK_DELIVERY_HEADER, WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER
from chamvi._inbound import InboundContext, subscribers
from chamvi.channels import ChannelContext, ChannelMessage, InboundEvent
from chamvi.errors import (
    ChamviValidationError,
    ChannelNotFoundError,
    InvalidAgentDefinitionError,
    InvalidInputError,
    StaleDeliveryError,
    WebhookSignatureError,
)
from chamvi.settings import Settings
from chamvi.webhooks import delivery_id, legacy_signature, signature, signed_headers, webhook_channel
from tests.unit.test_tool_runner import InMemoryRun, call, request

SECRET = "unit-secret-0123456789"


def test_the_signature_is_what_the_one_line_openssl_command_prints() -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl on this machine")
    body = b'{"ticket": 1}'
    printed = subprocess.run(
        [openssl, "dgst", "-sha256", "-hmac", SECRET],
        input=b"1700000000.d-1." + body,
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert signature(SECRET, 1700000000, "d-1", body) == "v2=" + printed.split()[-1]
    legacy = subprocess.run(
        [openssl, "dgst", "-sha256", "-hmac", SECRET],
        input=b"1700000000." + body,
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert legacy_signature(SECRET, 1700000000, body) == "sha256=" + legacy.split()[-1]


def test_a_webhook_verifies_the_signature_before_the_timestamp_and_reads_the_delivery() -> None:
    channel = webhook_channel("tickets", secret=SECRET, address_of=lambda p: f"ticket-{p['id']}")
    body = b'{"id": 5}'
    now = time.time()
    delivery = channel.verify(signed_headers(SECRET, body, delivery="d-1"), body, now)
    assert isinstance(delivery, WebhookEvent)
    assert (delivery.delivery, delivery.payload, delivery.address) == ("d-1", {"id": 5}, "ticket-5")

    with pytest.raises(WebhookSignatureError, match="missing"):
        channel.verify({WEBHOOK_DELIVERY_HEADER: "d-1"}, body, now)
    forged = signed_headers("another-secret-0123456", body, delivery="d-1")
    with pytest.raises(WebhookSignatureError, match="does not match"):
        channel.verify(forged, body, now)
    with pytest.raises(WebhookSignatureError):
        channel.verify(
            {**signed_headers(SECRET, body, delivery="d-1"), WEBHOOK_SIGNATURE_HEADER: "v2=é"}, body, now
        )
    with pytest.raises(WebhookSignatureError, match="does not match"):  # the id is signed
        channel.verify(
            {**signed_headers(SECRET, body, delivery="d-1"), WEBHOOK_DELIVERY_HEADER: "d-2"}, body, now
        )
    with pytest.raises(WebhookSignatureError):  # a digit, but not one int() reads
        channel.verify(
            {**signed_headers(SECRET, body, delivery="d-1"), WEBHOOK_TIMESTAMP_HEADER: "²"}, body, now
        )
    tampered = signed_headers(SECRET, body, delivery="d-1")
    with pytest.raises(WebhookSignatureError):
        channel.verify(tampered, b'{"id": 6}', now)
    old = signed_headers(SECRET, body, delivery="d-1", timestamp=int(now) - 600)
    with pytest.raises(StaleDeliveryError, match="window"):
        channel.verify(old, body, now)
    # a stale timestamp with a wrong signature is a bad signature, not a replay
    old[WEBHOOK_SIGNATURE_HEADER] = "v2=00"
    with pytest.raises(WebhookSignatureError):
        channel.verify(old, body, now)
    signed = signed_headers(SECRET, body, delivery="")
    no_id = {k: v for k, v in signed.items() if k != WEBHOOK_DELIVERY_HEADER}
    with pytest.raises(ChamviValidationError, match=WEBHOOK_DELIVERY_HEADER):
        channel.verify(no_id, body, now)
    not_json = signed_headers(SECRET, b"nope", delivery="d-2")
    with pytest.raises(ChamviValidationError, match="not JSON"):
        channel.verify(not_json, b"nope", now)
    assert WEBHOOK_TIMESTAMP_HEADER in not_json
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ChamviValidationError, match="not JSON"):
        channel.verify(signed_headers(SECRET, deep, delivery="d-3"), deep, now)


def test_a_legacy_signature_is_refused_unless_taken_and_then_keys_the_runs_by_itself() -> None:
    body = b'{"id": 5}'
    now = int(time.time())
    legacy = {
        WEBHOOK_TIMESTAMP_HEADER: str(now),
        WEBHOOK_SIGNATURE_HEADER: legacy_signature(SECRET, now, body),
        WEBHOOK_DELIVERY_HEADER: "d-1",
    }
    with pytest.raises(WebhookSignatureError, match="legacy_signatures=True"):
        webhook_channel("tickets", secret=SECRET).verify(legacy, body, now)
    taking = webhook_channel("tickets", secret=SECRET, legacy_signatures=True)
    first = taking.verify(legacy, body, now)
    again = taking.verify({**legacy, WEBHOOK_DELIVERY_HEADER: "d-invented"}, body, now)
    assert first.delivery == again.delivery == "sha256-" + legacy[WEBHOOK_SIGNATURE_HEADER][7:]
    assert taking.verify(signed_headers(SECRET, body, delivery="d-2"), body, now).delivery == "d-2"


def test_an_effect_key_becomes_a_delivery_id_that_signs_one_way() -> None:
    assert delivery_id("run-a:emit:1") == "run-a:emit:1"
    assert delivery_id("order.42").startswith("sha256-") and "." not in delivery_id("order.42")
    assert len(delivery_id("k" * 300)) <= 255


def test_a_webhook_definition_is_checked_when_built() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="at least 16"):
        webhook_channel("tickets", secret="short")
    with pytest.raises(InvalidAgentDefinitionError, match="http"):
        webhook_channel("tickets", secret=SECRET, url="ftp://x")
    with pytest.raises(InvalidAgentDefinitionError, match="tolerance"):
        webhook_channel("tickets", secret=SECRET, tolerance=timedelta(0))
    with pytest.raises(InvalidAgentDefinitionError, match="invalid"):
        webhook_channel("Tickets", secret=SECRET)
    assert not webhook_channel("tickets", secret=SECRET).sends


def test_one_event_matches_every_subscription_whose_filter_accepts_it() -> None:
    def kind(name: str) -> ChannelSubscription:
        return ChannelSubscription("tickets", id=name, filter=lambda e: e.payload["type"] == name)

    triage = define_agent(name="triage", instructions="x", model="local/demo", channels=[kind("created")])
    audit = define_agent(name="audit", instructions="x", model="local/demo", channels=["tickets"])
    app = App(agents=[triage, audit], channels=[webhook_channel("tickets", secret=SECRET)])
    created = InboundEvent(channel="tickets", key="k", payload={"type": "created"})
    closed = InboundEvent(channel="tickets", key="k", payload={"type": "closed"})
    assert [(a.name, s.id) for a, s in subscribers(app.agents, created)] == [
        ("triage", "created"),
        ("audit", None),
    ]
    assert [a.name for a, _ in subscribers(app.agents, closed)] == ["audit"]


def test_subscriptions_are_checked_by_define_agent_and_the_app() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="unique"):
        define_agent(
            name="a",
            instructions="x",
            channels=[ChannelSubscription("c", id="s"), ChannelSubscription("c", id="s")],
        )
    with pytest.raises(InvalidAgentDefinitionError, match="function"):
        define_agent(name="a", instructions="x", channels=[ChannelSubscription("c", filter="yes")])  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="1-64"):
        define_agent(name="a", instructions="x", channels=[ChannelSubscription("c", id="")])
    agent = define_agent(name="a", instructions="x", model="local/demo", channels=["nowhere"])
    with pytest.raises(InvalidAgentDefinitionError, match="unknown channel 'nowhere'"):
        App(agents=[agent])


class Outbox:
    name = "desk"
    default_address: str | None = "ops"
    untrusted = False

    def __init__(self) -> None:
        self.sent: list[ChannelMessage] = []

    async def out(self, message: ChannelMessage) -> None:
        self.sent.append(message)


@tool
async def send_to(address: str, ctx: ToolContext) -> str:
    """Sends a note."""
    await ctx.channels.find_one_or_fail("desk").emit("note", address=address)
    return "sent"


def desk_app(on_tainted: str = "approve") -> tuple[App, Outbox]:
    outbox = Outbox()
    agent = define_agent(
        name="clerk",
        instructions="x",
        model="local/demo",
        tools=[send_to],
        trust=AgentTrust(on_tainted=on_tainted),  # type: ignore[arg-type]
    )
    return App(agents=[agent], channels=[outbox]), outbox


async def test_an_emit_is_recorded_in_the_run_as_soon_as_out_returns() -> None:
    app, outbox = desk_app()
    run = InMemoryRun()
    result = await call(app, request("send_to", {"address": "ops"}), run)
    assert result.status == "ok" and len(outbox.sent) == 1
    assert run.recorded_now == [outbox.sent[0].key]


async def test_a_tainted_runs_emit_is_gated_except_to_the_source_or_the_default_address() -> None:
    app, outbox = desk_app()
    run = InMemoryRun(trigger_envelope=TriggerEnvelope(channel="desk", address="alice"))
    to_default = await call(app, request("send_to", {"address": "ops"}, tainted=True), run)
    to_source = await call(app, request("send_to", {"address": "alice"}, tainted=True), run)
    elsewhere = await call(app, request("send_to", {"address": "mallory"}, tainted=True), run)
    assert (to_default.status, to_source.status, elsewhere.status) == ("ok", "ok", "approval")
    assert elsewhere.approval is not None and "mallory" not in elsewhere.approval.title
    # the source channel heard of the wait: generic, to the source address, no arguments
    notice = outbox.sent[-1]
    assert (
        notice.title is not None and notice.title.startswith("Approval needed") and notice.address == "alice"
    )
    assert "mallory" not in notice.body and len(outbox.sent) == 3

    denying, denied_outbox = desk_app("deny")
    denied = await call(denying, request("send_to", {"address": "mallory"}, tainted=True), run)
    assert denied.error is not None and denied.error.code == "tool_denied" and denied_outbox.sent == []


def test_chamvi_no_channels_turns_the_workers_channels_off() -> None:
    assert Settings.from_env({"CHAMVI_NO_CHANNELS": "true"}).no_channels
    assert not Settings.from_env({}).no_channels
    with pytest.raises(ChamviValidationError, match="CHAMVI_NO_CHANNELS"):
        Settings.from_env({"CHAMVI_NO_CHANNELS": "maybe"})


class Nowhere(Outbox):
    name = "nowhere"
    default_address = None


@tool
async def ask_nowhere(ctx: ToolContext) -> str:
    """Asks through a channel that has no address to ask at."""
    decision = await ctx.channels.find_one_or_fail("nowhere").approve(title="Go?")
    return "went" if decision.approved else "stayed"


async def test_an_approval_asked_through_a_channel_without_an_address_is_a_tool_error_naming_it() -> None:
    agent = define_agent(name="clerk", instructions="x", model="local/demo", tools=[ask_nowhere])
    app = App(agents=[agent], channels=[Nowhere()])
    result = await call(app, request("ask_nowhere", {}), InMemoryRun())
    assert result.error is not None and result.error.code == "validation_error"
    assert "'nowhere' has no address" in result.error.message


async def test_a_channel_dispatch_refuses_a_bad_key_or_address_before_starting_anything() -> None:
    ctx = InboundContext("tickets", {}, runs=None)  # type: ignore[arg-type]  # nothing may be started
    with pytest.raises(InvalidInputError, match="delivery key"):
        await ctx.dispatch({}, key="")
    with pytest.raises(InvalidInputError, match="delivery key"):
        await ctx.dispatch({}, key="k" * 129)
    with pytest.raises(InvalidInputError, match="address 5"):
        await ctx.dispatch({}, key="k", address=5)  # type: ignore[arg-type]  # an address_of gone wrong


class Listener:
    """A channel that only receives: no ``out``."""

    name = "listener"
    default_address = "room"
    untrusted = False

    async def start(self, ctx: ChannelContext) -> None:
        pass

    async def stop(self) -> None:
        pass


@tool
async def look_up_channels(ctx: ToolContext) -> dict[str, object]:
    """Finds channels as a tool does, and reports what it found."""
    found: dict[str, object] = {
        "find": sorted(handle.name for handle in ctx.channels.find()),
        "source": getattr(ctx.channels.find_one(), "name", None),
    }
    for name in ("desk", "listener", "tickets", "missing"):
        found[name] = getattr(ctx.channels.find_one(name), "name", None)
        try:
            found[f"{name}!"] = ctx.channels.find_one_or_fail(name).name
        except ChannelNotFoundError as error:
            found[f"{name}!"] = f"{error.code}: {error.message}"
    try:
        ctx.channels.find_one_or_fail()
    except ChannelNotFoundError as error:
        found["source!"] = f"{error.code}: {error.message}"
    return found


async def test_find_one_answers_only_channels_that_can_send_and_find_one_or_fail_says_why() -> None:
    agent = define_agent(name="clerk", instructions="x", model="local/demo", tools=[look_up_channels])
    inbound_only = webhook_channel("tickets", secret=SECRET)  # no url: it receives, it cannot send
    # the seed's channels may leave out `out`; chamvi's Channel type asks for it, the runtime does not
    app = App(agents=[agent], channels=[Outbox(), Listener(), inbound_only])  # type: ignore[list-item]
    from_listener = InMemoryRun(trigger_envelope=TriggerEnvelope(channel="listener", address="room"))

    result = await call(app, request("look_up_channels", {}), from_listener)

    assert result.status == "ok", result.error
    found = result.output
    assert (found["find"], found["desk"], found["desk!"]) == (["desk"], "desk", "desk")
    assert found["listener"] is None and found["missing"] is None and found["source"] is None
    assert found["listener!"] == (
        "channel_not_found: channel 'listener' cannot send (it has no out); the channels that can send "
        "are 'desk'"
    )
    assert found["tickets"] is None
    assert found["tickets!"].startswith("channel_not_found: channel 'tickets' cannot send")
    assert found["missing!"].startswith("channel_not_found: no channel 'missing' is registered")
    assert found["source!"].startswith("channel_not_found: channel 'listener' cannot send")

    manual = await call(app, request("look_up_channels", {}), InMemoryRun())
    assert manual.output["source!"].startswith("channel_not_found: this run came from no channel")
