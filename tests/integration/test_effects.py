"""Effect tools and channel emits apply once per key; taint marks runs and guards tools."""

from __future__ import annotations

from chamvi import (
    App,
    ChamviClient,
    RunStatus,
    ToolContext,
    Trust,
    console_channel,
    define_agent,
    effect_tool,
    tool,
)
from chamvi.providers import ModelRegistry, ScriptedModel, call, calls, reply
from tests.polling import until_status

applied: list[str] = []
lines: list[str] = []


@effect_tool
async def post_comment(body: str) -> dict[str, str]:
    """Posts a comment."""
    applied.append(body)
    return {"posted": body}


@effect_tool(effect_key=lambda args, ctx: f"{ctx.run.run_id}:label")
async def set_label(label: str) -> str:
    """Sets the one label of the issue."""
    applied.append(f"label:{label}")
    return label


@tool
async def announce(text: str, ctx: ToolContext) -> str:
    """Announces through the run's source channel."""
    channel = ctx.channels.find_one_or_fail()
    await channel.emit(text, title="update")
    await channel.emit(text, title="update")
    return "announced"


@tool
async def ask_on_console(action: str, ctx: ToolContext) -> str:
    """Asks through the console channel before acting."""
    decision = await ctx.channels.find_one_or_fail("console").approve(
        title=f"{action}?", body="Please check."
    )
    return f"{action}: {'yes' if decision.approved else 'no'}"


@tool(trust=Trust(taint=True))
async def read_web(url: str) -> str:
    """Reads a page someone else wrote."""
    return f"content of {url}"


@tool(trust=Trust(guard_when_tainted=True))
async def publish(text: str) -> str:
    """Publishes text to the world."""
    applied.append(f"published:{text}")
    return "published"


def make_app(turns: list) -> App:
    models = ModelRegistry()
    models.register("scripted/effects", ScriptedModel(turns))
    return App(
        agents=[
            define_agent(
                name="effects",
                model="scripted/effects",
                instructions="Test.",
                tools=[post_comment, set_label, announce, read_web, publish, ask_on_console],
                channels=["console"],
            )
        ],
        models=models,
        channels=[console_channel(write=lines.append)],
    )


async def test_an_identical_effect_call_in_one_run_applies_once(chamvi: ChamviClient, running_worker) -> None:
    applied.clear()
    turns = [
        call("post_comment", body="hi"),
        call("post_comment", body="hi"),
        call("post_comment", body="other"),
        calls(call("set_label", label="bug"), call("set_label", label="feature")),
        reply("done"),
    ]
    async with running_worker(make_app(turns)):
        run = await chamvi.wait((await chamvi.dispatch("effects")).run_id)
    assert run.status == RunStatus.COMPLETED
    assert applied == ["hi", "other", "label:bug"]
    outputs = [s.output for s in run.steps if s.kind == "tool"]
    assert outputs == [{"posted": "hi"}, {"posted": "hi"}, {"posted": "other"}, "bug", "bug"]


async def test_identical_emits_send_once_to_the_source_address(chamvi: ChamviClient, running_worker) -> None:
    lines.clear()
    turns = [
        call("announce", text="Labelled as bug."),
        call("announce", text="Labelled as bug."),
        reply("ok"),
    ]
    async with running_worker(make_app(turns)):
        run = await chamvi.wait(
            (await chamvi.dispatch("effects", channel="console", address="issue-1")).run_id
        )
    assert run.status == RunStatus.COMPLETED
    assert lines == ["[console -> issue-1] update", "Labelled as bug."]


async def test_emit_without_a_source_channel_is_a_channel_not_found_tool_error(
    chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(make_app([call("announce", text="x"), reply("ok")])):
        run = await chamvi.wait((await chamvi.dispatch("effects")).run_id)
    step = next(s for s in run.steps if s.kind == "tool")
    assert step.error is not None and step.error.code == "channel_not_found"


async def test_an_untrusted_result_taints_the_run_and_guards_outbound_tools(
    chamvi: ChamviClient, running_worker
) -> None:
    applied.clear()
    turns = [
        call("publish", text="before"),
        call("read_web", url="https://x"),
        call("publish", text="after"),
        reply("ok"),
    ]
    async with running_worker(make_app(turns)):
        run_id = (await chamvi.dispatch("effects")).run_id
        waiting = await until_status(chamvi, run_id, RunStatus.WAITING)
        assert waiting.taint is not None and waiting.taint.source == "tool:read_web"
        assert waiting.waiting is not None and "publish" in waiting.waiting.title
        await chamvi.approvals.approve(run_id, approved=False, reason="not after reading the web")
        run = await chamvi.wait(run_id)
    assert applied == ["published:before"]
    denied = [s for s in run.steps if s.kind == "tool"][-1]
    assert denied.error is not None and denied.error.code == "tool_denied"


async def test_a_channel_approval_is_delivered_once_with_its_deadline(
    chamvi: ChamviClient, running_worker
) -> None:
    lines.clear()
    async with running_worker(make_app([call("ask_on_console", action="Restart"), reply("ok")])):
        run_id = (await chamvi.dispatch("effects", channel="console", address="ops-room")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id)
        run = await chamvi.wait(run_id)
    assert next(s for s in run.steps if s.kind == "tool").output == "Restart: yes"
    assert lines[:2] == ["[console -> ops-room] Approval needed: Restart?", "Please check."]
    assert lines[2].startswith("Waiting for an answer until ") and len(lines) == 4
    assert lines[3].startswith("Run ") and "chamvi approve" in lines[3]
