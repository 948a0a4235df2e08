"""Declaring MCP servers and handing their tools to agents; the tool runner's part, with no server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chamvi import (
    AgentTrust,
    App,
    EffectSpec,
    InvalidAgentDefinitionError,
    Trust,
    define_agent,
    mcp_server,
    mcp_tools,
    require_tool_permission,
)
from chamvi._tool_runner import ToolRunner
from chamvi.errors import InvalidAppError
from chamvi.models import Invoker, ToolCall, ToolRequest, TriggerEnvelope
from chamvi.worker_state import AppRuntime
from tests.unit.test_tool_runner import InMemoryRun

NOWHERE = "http://127.0.0.1:9/mcp"
"""The discard port: nothing answers, so a test that reached for the server would see it down."""


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"name": "GitHub", "url": NOWHERE}, "MCP server name 'GitHub' is invalid"),
        ({"name": "gh"}, "give exactly one of command=[...] (stdio) and url=... (streamable HTTP)"),
        ({"name": "gh", "url": NOWHERE, "command": ["x"]}, "give exactly one of"),
        ({"name": "gh", "command": "npx server"}, "command must be a non-empty list of strings"),
        ({"name": "gh", "url": "localhost:8000/mcp"}, "must start with http:// or https://"),
        ({"name": "gh", "command": ["x"], "headers": {"A": "b"}}, "headers= applies to url= servers only"),
        ({"name": "gh", "url": NOWHERE, "env": {"A": "b"}}, "env= applies to command= servers only"),
        ({"name": "gh", "url": NOWHERE, "tools": ["get.issue"]}, "tool name 'get.issue' in tools is invalid"),
        ({"name": "gh", "url": NOWHERE, "tools": ["a", "a"]}, "tools names a tool twice"),
        ({"name": "gh", "url": NOWHERE, "headers": {"A": 1}}, "headers must map strings to strings"),
        (
            {"name": "gh", "url": NOWHERE, "tools": ["a"], "effects": {"b": EffectSpec()}},
            "effects names 'b', which tools= leaves out",
        ),
        ({"name": "gh", "url": NOWHERE, "effects": {"a": "yes"}}, "effects['a'] must be an EffectSpec"),
        ({"name": "gh", "url": NOWHERE, "trust": True}, "trust must be a Trust(...)"),
    ],
)
def test_a_bad_mcp_server_declaration_names_its_problem(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError) as raised:
        mcp_server(**options)
    assert problem in raised.value.message


def runner(app: App) -> ToolRunner:
    return ToolRunner(AppRuntime(app))


def test_an_agent_using_an_undeclared_mcp_server_fails_the_boot_naming_the_declared_ones() -> None:
    agent = define_agent(name="a", model="local/demo", instructions="x", tools=mcp_tools("github"))
    with pytest.raises(InvalidAgentDefinitionError) as raised:
        App(agents=[agent], mcp_servers=[mcp_server("jira", url=NOWHERE)])
    assert "MCP server 'github', which the App does not declare" in raised.value.message
    assert "declared MCP servers are 'jira'" in raised.value.message


def test_two_mcp_servers_of_one_name_or_one_server_given_twice_are_refused() -> None:
    with pytest.raises(InvalidAppError, match="two MCP servers are named 'gh'"):
        App(agents=[], mcp_servers=[mcp_server("gh", url=NOWHERE), mcp_server("gh", command=["x"])])
    with pytest.raises(InvalidAgentDefinitionError, match=r"mcp_tools\('gh'\) is given twice"):
        define_agent(name="a", instructions="x", tools=[*mcp_tools("gh"), *mcp_tools("gh")])
    with pytest.raises(InvalidAgentDefinitionError, match="give the name of an mcp_server"):
        mcp_tools("GitHub")


def test_the_agent_spec_names_the_mcp_servers_a_run_lists() -> None:
    agent = define_agent(name="a", model="local/demo", instructions="x", tools=mcp_tools("gh"))
    app = App(agents=[agent], mcp_servers=[mcp_server("gh", url=NOWHERE)])
    assert app.spec("a").mcp_servers == ["gh"]


def _app(tool_policy: Any = None, **server_options: Any) -> App:
    agent = define_agent(
        name="clerk", model="local/demo", instructions="x", tools=mcp_tools("gh"), tool_policy=tool_policy
    )
    other = define_agent(name="other", model="local/demo", instructions="x")
    return App(agents=[agent, other], mcp_servers=[mcp_server("gh", url=NOWHERE, **server_options)])


def _request(
    agent: str, tool: str, server: str | None = "gh", invoker: Invoker | None = None, **arguments: Any
) -> ToolRequest:
    return ToolRequest(
        run_id="run-1",
        agent=agent,
        step=0,
        call=ToolCall(id="call-1", name=tool, arguments=arguments),
        trigger=TriggerEnvelope(invoker=invoker),
        mcp_server=server,
    )


@pytest.mark.parametrize(
    ("agent", "tool", "server"),
    [("other", "create_issue", "gh"), ("clerk", "delete_repo", "gh"), ("clerk", "create_issue", None)],
)
async def test_an_mcp_tool_the_agent_does_not_use_is_not_allowed_and_no_server_is_called(
    agent: str, tool: str, server: str | None
) -> None:
    app = _app(tools=["create_issue"])
    result = await runner(app).run(_request(agent, tool, server), InMemoryRun(), asyncio.Event())
    assert result.status == "error" and result.error is not None
    assert result.error.code == "tool_not_allowed"


async def test_a_recorded_mcp_effect_is_answered_from_the_record_without_calling_the_server() -> None:
    app = _app(effects={"create_issue": EffectSpec(effect_key=lambda args, ctx: f"issue:{args.title}")})
    run = InMemoryRun(effects={"issue:Crash": {"number": 7}})
    result = await runner(app).run(_request("clerk", "create_issue", title="Crash"), run, asyncio.Event())
    assert (result.status, result.output) == ("ok", {"number": 7})
    assert run.asked == ["issue:Crash"]


async def test_an_unreachable_mcp_server_is_a_tool_error_naming_it() -> None:
    result = await runner(_app()).run(_request("clerk", "create_issue"), InMemoryRun(), asyncio.Event())
    assert result.status == "error" and result.error is not None
    assert result.error.code == "mcp_server_unavailable"
    assert (
        "MCP server 'gh' (http://127.0.0.1:9/mcp) failed during the call to 'create_issue'"
        in result.error.message
    )


@pytest.mark.parametrize(
    ("permissions", "code"),
    [([], "tool_not_allowed"), (["tool:clerk:create_issue"], "mcp_server_unavailable")],
)
async def test_require_tool_permission_covers_mcp_tools_by_their_names(
    permissions: list[str], code: str
) -> None:
    app = _app(tool_policy=require_tool_permission())
    invoker = Invoker(id="u1", kind="user", permissions=permissions)
    result = await runner(app).run(
        _request("clerk", "create_issue", invoker=invoker), InMemoryRun(), asyncio.Event()
    )
    assert result.error is not None and result.error.code == code  # allowed: the call reaches for the server


def test_a_servers_place_in_messages_leaves_out_the_credentials_of_its_url() -> None:
    server = mcp_server("gh", url="https://user:s3cret@mcp.example.com/mcp?x=1")
    assert server.where == "https://mcp.example.com/mcp?x=1"
    assert mcp_server("notes", command=["python", "notes.py"]).where == "python notes.py"


def test_an_agents_trust_may_name_mcp_tools_which_the_spec_hands_the_run_to_check() -> None:
    trust = AgentTrust(tools={"create_issue": Trust(guard_when_tainted=True)})
    with pytest.raises(InvalidAgentDefinitionError, match="trust names tools it does not have"):
        define_agent(name="a", model="local/demo", instructions="x", trust=trust)
    agent = define_agent(name="a", model="local/demo", instructions="x", tools=mcp_tools("gh"), trust=trust)
    app = App(agents=[agent], mcp_servers=[mcp_server("gh", url=NOWHERE)])
    assert app.spec("a").classified_tools == ["create_issue"]
