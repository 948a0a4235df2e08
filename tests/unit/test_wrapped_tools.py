"""Tools run outside a worker with ``wrap_tools_for_run``: policy, hooks, effects and taint as in a run."""

from __future__ import annotations

from typing import Any

import pytest

from chamvi import (
    AgentHooks,
    AgentTrust,
    App,
    ApprovalDecision,
    ToolCallInfo,
    ToolContext,
    ToolNotAllowedError,
    Trust,
    approve,
    define_agent,
    define_context_key,
    effect_tool,
    inject,
    tool,
    wrap_tools_for_run,
)

applied: list[str] = []


@effect_tool
async def post_comment(body: str) -> str:
    """Posts a comment."""
    applied.append(body)
    return f"posted {body!r}"


@tool(trust=Trust(taint=True))
async def fetch_page(url: str) -> str:
    """Reads a page from the web."""
    return f"text of {url}"


@tool(trust=Trust(guard_when_tainted=True))
async def send_mail(to: str) -> str:
    """Sends a mail."""
    return f"sent to {to}"


async def test_an_effect_recorded_in_the_store_is_applied_once_across_calls_and_wraps() -> None:
    applied.clear()
    store: dict[str, Any] = {}
    first = await wrap_tools_for_run([post_comment], run_id="r-1", effects=store)["post_comment"](
        {"body": "hi"}
    )
    again = await wrap_tools_for_run([post_comment], run_id="r-1", effects=store)["post_comment"](
        {"body": "hi"}
    )
    assert (first.status, first.output) == (again.status, again.output) == ("ok", "posted 'hi'")
    assert applied == ["hi"] and list(store) == list(first.effects)


async def test_a_call_allow_refuses_raises_tool_not_allowed() -> None:
    tools = wrap_tools_for_run(
        [post_comment, fetch_page], run_id="r-1", allow=lambda name: name != "post_comment"
    )
    assert (await tools["fetch_page"]({"url": "u"})).status == "ok"
    with pytest.raises(ToolNotAllowedError, match="'post_comment' is not allowed"):
        await tools["post_comment"]({"body": "hi"})


async def test_hooks_rewrite_the_input_and_the_output() -> None:
    def before(info: ToolCallInfo, ctx: ToolContext) -> dict[str, Any]:
        return {**info.input, "url": info.input["url"].lower()}

    def after(info: ToolCallInfo, output: Any, ctx: ToolContext) -> Any:
        return output.upper()

    tools = wrap_tools_for_run(
        [fetch_page], run_id="r-1", hooks=AgentHooks(before_tool_execution=before, after_tool_execution=after)
    )
    assert (await tools["fetch_page"]({"url": "HTTP://A"})).output == "TEXT OF HTTP://A"


async def test_an_untrusted_result_taints_the_run_and_guards_later_calls_until_approved() -> None:
    tools = wrap_tools_for_run([fetch_page, send_mail], run_id="r-1")
    assert (await tools["send_mail"]({"to": "ada"})).status == "ok"  # untainted: no gate
    assert (await tools["fetch_page"]({"url": "u"})).taint == "tool:fetch_page"
    assert tools.taint == "tool:fetch_page"
    asked = await tools["send_mail"]({"to": "ada"})
    assert asked.status == "approval" and asked.approval is not None
    assert asked.approval.input == {"to": "ada"}
    approved = await tools["send_mail"]({"to": "ada"}, decisions=[ApprovalDecision(approved=True)])
    assert (approved.status, approved.output) == ("ok", "sent to ada")


async def test_once_tainted_an_agent_that_denies_refuses_guarded_calls_without_asking() -> None:
    tools = wrap_tools_for_run(
        [send_mail], run_id="r-1", taint="channel:inbox", trust=AgentTrust(on_tainted="deny")
    )
    denied = await tools["send_mail"]({"to": "ada"})
    assert denied.status == "error" and denied.error is not None and denied.error.code == "tool_denied"


CLIENT = define_context_key("client")


@tool
async def whoami(ctx: ToolContext) -> str:
    """Says which client the tool reaches."""
    return str(inject(ctx, CLIENT))


@tool
async def ask(ctx: ToolContext) -> str:
    """Asks a person."""
    decision = await approve(ctx, title="Go?")
    return "go" if decision.approved else f"stop: {decision.reason}"


async def test_tools_inject_what_an_app_provides_and_approvals_answer_with_decisions() -> None:
    app = App(agents=[define_agent(name="a", model="local/demo", instructions="x")])
    app.provide(CLIENT, "crm-eu")
    tools = wrap_tools_for_run([whoami, ask], run_id="r-1", provided=app)
    assert (await tools["whoami"]()).output == "crm-eu"
    assert (await tools["ask"]()).status == "approval"
    denied = await tools["ask"](decisions=[ApprovalDecision(approved=False, reason="no")])
    assert denied.output == "stop: no"
    missing = await wrap_tools_for_run([whoami], run_id="r-1")["whoami"]()
    assert missing.error is not None and missing.error.code == "context_not_provided"
