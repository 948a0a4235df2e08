"""Approval tokens: signed, expiring, opaque; the secret from the settings or the data folder."""

from __future__ import annotations

import asyncio
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chamvi import App, ApprovalDecision, ToolContext, TriggerEnvelope, approve, define_agent, tool
from chamvi._tool_runner import ToolRunner
from chamvi.approval_tokens import SECRET_FILE, ApprovalTokens, approval_secret, approval_tokens
from chamvi.channels import ChannelMessage
from chamvi.errors import ApprovalTokenExpiredError, ApprovalTokenInvalidError, ChamviValidationError
from chamvi.models import ToolRequest, ToolResult
from chamvi.settings import Settings
from chamvi.worker_state import AppRuntime
from tests.unit.test_channels import Outbox
from tests.unit.test_tool_runner import InMemoryRun, request

SECRET = "s" * 32
LATER = datetime.now(UTC) + timedelta(hours=1)
OTHER = ApprovalTokens(SECRET).issue("run-deployer-1", "0:call-1:1", expires=LATER, detail=True)


def test_a_token_names_its_run_and_approval_until_it_expires() -> None:
    tokens = ApprovalTokens(SECRET)
    token = tokens.issue("run-deployer-1", "0:call-1:0", expires=LATER, detail=True)
    claims = tokens.verify(token)
    assert (claims.run_id, claims.approval_id, claims.detail) == ("run-deployer-1", "0:call-1:0", True)
    assert claims.expires == LATER.replace(microsecond=0)
    assert token.startswith("ca1.") and all(c.isalnum() or c in "._-" for c in token)
    with pytest.raises(ApprovalTokenExpiredError, match="expired at") as expired:
        tokens.verify(token, now=LATER + timedelta(seconds=1))
    assert expired.value.code == "approval_token_expired"


@pytest.mark.parametrize(
    "forge",
    [
        lambda t: t[:-2],  # cut short
        lambda t: t.replace("ca1.", "ca2."),
        lambda t: ".".join([*OTHER.split(".")[:2], t.split(".")[2]]),  # another approval's payload
        lambda t: ApprovalTokens("o" * 32).issue("run-deployer-1", "0:call-1:0", expires=LATER, detail=True),
        lambda t: "not a token",
        lambda t: "ca1..",
        lambda t: "ca1.é.é",
        lambda t: t + "A" * 5000,
    ],
    ids=["truncated", "prefix", "payload", "other-secret", "garbage", "empty-parts", "non-ascii", "long"],
)
def test_a_forged_token_is_refused_without_a_word_about_the_run(forge: Callable[[str], str]) -> None:
    tokens = ApprovalTokens(SECRET)
    token = tokens.issue("run-deployer-1", "0:call-1:0", expires=LATER, detail=True)
    with pytest.raises(ApprovalTokenInvalidError) as refused:
        tokens.verify(forge(token))
    assert refused.value.code == "approval_token_invalid"
    assert "deployer" not in refused.value.message and "call-1" not in refused.value.message


def test_a_short_secret_is_refused_with_how_to_make_one() -> None:
    with pytest.raises(ChamviValidationError, match="at least 32"):
        ApprovalTokens("short")


def test_the_link_opens_the_approvals_page_with_the_token_in_the_fragment() -> None:
    tokens = ApprovalTokens(SECRET, public_url="https://agents.example.com/api/")
    assert tokens.link("ca1.x.y") == "https://agents.example.com/api/ui/#answer=ca1.x.y"
    assert ApprovalTokens(SECRET).link("ca1.x.y") is None
    assert SECRET not in repr(tokens)


def test_without_a_configured_secret_a_server_generates_one_in_the_data_folder_once(tmp_path: Path) -> None:
    settings = Settings(data=tmp_path / "data")
    assert approval_secret(settings, create=False) is None  # a CLI never invents one
    first = approval_secret(settings, create=True)
    assert first is not None and len(first) == 64
    path = tmp_path / "data" / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert approval_secret(settings, create=True) == first == approval_secret(settings, create=False)
    assert [p.name for p in path.parent.iterdir()] == [SECRET_FILE]
    configured = Settings(data=tmp_path / "data", approval_secret="c" * 40)
    assert approval_secret(configured, create=True) == "c" * 40
    token = approval_tokens(settings, create=False)
    assert token is not None
    assert approval_tokens(Settings(data=tmp_path / "none"), create=False) is None


def test_the_secret_and_public_url_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {"CHAMVI_APPROVAL_SECRET": "x" * 40, "CHAMVI_PUBLIC_URL": " https://agents.example.com/ "}
    )
    assert settings.approval_secret == "x" * 40 and "x" * 40 not in repr(settings)
    assert settings.public_url == "https://agents.example.com"
    assert Settings.from_env({}).public_url is None
    with pytest.raises(ChamviValidationError, match="is not a base URL"):
        Settings.from_env({"CHAMVI_PUBLIC_URL": "agents.example.com"})


@tool
async def wipe(disk: str, ctx: ToolContext) -> str:
    """Wipes a disk after two people said yes."""
    first = await ctx.channels.find_one_or_fail("desk").approve(title=f"Wipe {disk}?", body="All of it.")
    second = await ctx.channels.find_one_or_fail("desk").approve(title="Really?")
    return "wiped" if first.approved and second.approved else "kept"


@tool
async def guarded(disk: str, ctx: ToolContext) -> str:
    """Asks with the plain approve(): the run's source channel gets the generic notice."""
    decision = await approve(ctx, title=f"Format {disk}?")
    return "formatted" if decision.approved else "kept"


def desk_app() -> tuple[App, Outbox]:
    desk = Outbox()
    agent = define_agent(name="clerk", instructions="x", model="local/demo", tools=[wipe, guarded])
    return App(agents=[agent], channels=[desk]), desk


async def ask(app: App, tokens: ApprovalTokens, req: ToolRequest, run: InMemoryRun) -> ToolResult:
    result = await ToolRunner(AppRuntime(app, approval_tokens=tokens)).run(req, run, asyncio.Event())
    run.effects.update(result.effects)
    return result


def token_in(message: ChannelMessage) -> str:
    found = re.search(r"(ca1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)", message.body)
    assert found is not None, message.body
    return found.group(1)


async def test_a_channels_approval_request_carries_the_token_of_the_wait_it_starts() -> None:
    app, desk = desk_app()
    tokens = ApprovalTokens(SECRET)
    run = InMemoryRun()
    first = await ask(app, tokens, request("wipe", {"disk": "sda"}), run)
    assert first.status == "approval" and len(desk.sent) == 1
    assert "Approve with `chamvi approve --token ca1." in desk.sent[0].body
    claims = tokens.verify(token_in(desk.sent[0]))
    assert (claims.run_id, claims.approval_id, claims.detail) == ("run-1", "0:call-1:0", True)
    assert claims.expires > datetime.now(UTC) + timedelta(hours=23)

    yes = [ApprovalDecision(approved=True)]
    second = await ask(app, tokens, request("wipe", {"disk": "sda"}, decisions=yes, approval_waits=1), run)
    assert second.status == "approval" and len(desk.sent) == 2
    assert tokens.verify(token_in(desk.sent[1])).approval_id == "0:call-1:1"


async def test_a_request_asked_again_for_new_arguments_is_sent_again_with_a_token_for_the_new_wait() -> None:
    app, desk = desk_app()
    tokens = ApprovalTokens(SECRET, public_url="https://agents.example.com")
    run = InMemoryRun()
    await ask(app, tokens, request("wipe", {"disk": "sda"}), run)
    given_for_other_input = [ApprovalDecision(approved=True, input_digest="another input")]
    again = request("wipe", {"disk": "sda"}, decisions=given_for_other_input, approval_waits=1)
    await ask(app, tokens, again, run)
    await ask(app, tokens, again, run)  # a retried attempt sends nothing more
    assert len(desk.sent) == 2
    assert (
        desk.sent[1]
        .body.splitlines()[2]
        .startswith("Approve or deny: https://agents.example.com/ui/#answer=")
    )
    assert tokens.verify(token_in(desk.sent[1])).approval_id == "0:call-1:1"


async def test_the_runs_generic_notice_carries_a_token_that_shows_no_more_than_the_notice() -> None:
    app, desk = desk_app()
    tokens = ApprovalTokens(SECRET)
    run = InMemoryRun(trigger_envelope=TriggerEnvelope(channel="desk", address="alice"))
    result = await ask(app, tokens, request("guarded", {"disk": "sdb"}), run)
    assert result.status == "approval" and len(desk.sent) == 1
    notice = desk.sent[0]
    assert notice.address == "alice" and "sdb" not in notice.body and "sdb" not in (notice.title or "")
    claims = tokens.verify(token_in(notice))
    assert (claims.approval_id, claims.detail) == ("0:call-1:0", False)


async def test_without_a_secret_the_request_reads_as_it_always_did() -> None:
    app, desk = desk_app()
    result = await ToolRunner(AppRuntime(app)).run(
        request("wipe", {"disk": "sda"}), InMemoryRun(), asyncio.Event()
    )
    assert result.status == "approval"
    assert "token" not in desk.sent[0].body and len(desk.sent[0].body.splitlines()) == 3


async def test_no_token_goes_out_through_an_untrusted_channel_whose_posters_could_answer_with_it() -> None:
    app, desk = desk_app()
    desk.untrusted = True  # e.g. a public issue tracker: the request lands where anyone may read it
    run = InMemoryRun(trigger_envelope=TriggerEnvelope(channel="desk", address="issue-7"))
    result = await ask(app, ApprovalTokens(SECRET), request("guarded", {"disk": "sdb"}), run)
    assert result.status == "approval" and len(desk.sent) == 1
    assert "ca1." not in desk.sent[0].body and "chamvi approve run-1" in desk.sent[0].body
