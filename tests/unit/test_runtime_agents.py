"""Agents defined at runtime: checked against the App's catalog, stored as immutable revisions."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chamvi import App, ToolContext, Trust, define_agent, mcp_server, mcp_tools, tool
from chamvi.agent_revisions import ObjectRevisionStore
from chamvi.artifacts import ArtifactStore
from chamvi.dynamic_agents import RuntimeAgents
from chamvi.errors import AgentNotFoundError, ChamviValidationError, ConflictError, InvalidAppError
from chamvi.models import DispatchSettings, Invoker, ModelSettings, NamedTool, TriggerEnvelope
from chamvi.permissions import PolicyRun
from chamvi.tools import Tool
from chamvi.worker_state import AppRuntime

NOWHERE = "http://127.0.0.1:9/mcp"


@tool
async def lookup(order_id: str) -> str:
    """Looks an order up."""
    return order_id


@tool(trust=Trust(taint=True))
async def read_web(url: str) -> str:
    """Reads a page."""
    return url


@tool
async def refund(order_id: str, ctx: ToolContext) -> str:
    """Refunds an order."""
    return order_id


@tool
async def internal(secret: str) -> str:
    """A tool the catalog leaves out."""
    return secret


def make_app(**options: Any) -> App:
    return App(
        agents=[define_agent(name="support", model="local/demo", instructions="x", tools=[internal])],
        model="local/demo",
        mcp_servers=[mcp_server("gh", url=NOWHERE)],
        runtime_tools=[lookup, read_web, refund, *mcp_tools("gh")],
        **options,
    )


def registry(
    app: App | None = None, store: ObjectRevisionStore | None = None, **options: Any
) -> RuntimeAgents:
    return RuntimeAgents(app or make_app(), store or ObjectRevisionStore.memory(), **options)


TRIAGE: dict[str, Any] = {"instructions": "Triage.", "tools": ["lookup"]}


async def test_each_put_of_a_new_definition_is_the_next_revision() -> None:
    agents = registry()
    first = await agents.put_agent("triage", TRIAGE)
    second = await agents.put_agent("triage", {**TRIAGE, "instructions": "Triage carefully."})
    assert (first.agent.revision, first.created) == (1, True)
    assert (second.agent.revision, second.created, second.changed) == (2, False, True)
    assert first.agent.kind == "runtime" and first.agent.tools == ["lookup"]


async def test_a_put_equal_to_the_latest_revision_writes_nothing() -> None:
    agents = registry()
    await agents.put_agent("triage", TRIAGE)
    again = await agents.put_agent("triage", {**TRIAGE, "name": "triage", "budget": {"max_steps": 20}})
    assert (again.agent.revision, again.created, again.changed) == (1, False, False)


async def test_a_pinned_revision_stays_what_it_was_after_a_later_put() -> None:
    agents = registry()
    await agents.put_agent("triage", TRIAGE)
    await agents.put_agent("triage", {"instructions": "Other.", "tools": ["refund"]})
    first = await agents.agent("triage", 1)
    latest = await agents.current("triage")
    assert (first.revision, list(first.tools), first.instructions[0].content) == (1, ["lookup"], "Triage.")
    assert (latest.revision, list(latest.tools)) == (2, ["refund"])


@pytest.mark.parametrize(
    ("data", "path", "code"),
    [
        ({"instructions": "x", "tools": ["internal"]}, ("tools", 0), "unknown_tool"),
        ({"instructions": "x", "tools": ["lookup", "lookup"]}, ("tools", 1), "duplicate"),
        ({"instructions": "x", "mcp_servers": ["jira"]}, ("mcp_servers", 0), "unknown_mcp_server"),
        ({"instructions": "x", "model": "nosuch/model"}, ("model",), "model_not_found"),
        ({"instructions": "x", "budget": {"max_steps": 0}}, ("budget", "max_steps"), "greater_than_equal"),
        ({"instructions": "x", "budget": {"max_steps": 5000}}, ("budget", "max_steps"), "less_than_equal"),
        (
            {"instructions": "x", "budget": {"timeout_seconds": 1e12}},
            ("budget", "timeout_seconds"),
            "less_than_equal",
        ),
        ({"instructions": "x", "hooks": {}}, ("hooks",), "extra_forbidden"),
        ({"tools": []}, ("instructions",), "missing"),
        ({"instructions": [{"role": "tool", "content": "x"}]}, ("instructions", 0, "role"), "literal_error"),
        ({"instructions": ""}, ("instructions",), "string_too_short"),
        (
            {"instructions": "x", "trust": {"tools": {"refund": {"taint": True}}}},
            ("trust", "tools", "refund"),
            "unknown_tool",
        ),
        ({"instructions": "x", "trust": {"on_tainted": "ask"}}, ("trust", "on_tainted"), "literal_error"),
        ({"name": "other", "instructions": "x"}, ("name",), "name_mismatch"),
    ],
)
async def test_an_invalid_definition_is_refused_with_an_issue_at_its_field(
    data: dict[str, Any], path: tuple[str | int, ...], code: str
) -> None:
    agents = registry()
    with pytest.raises(ChamviValidationError) as refused:
        await agents.put_agent("triage", data)
    assert (path, code) in [(issue.path, issue.code) for issue in refused.value.issues]
    assert await agents.store.latest("triage") is None


async def test_model_settings_as_data_reach_the_agent_and_its_stored_definition() -> None:
    agents = registry()
    settings = {"temperature": 0.3, "tool_choice": {"tool": "lookup"}, "parallel_tool_calls": False}
    put = await agents.put_agent("triage", {**TRIAGE, "model_settings": settings})
    agent = await agents.current("triage")
    assert agent.model_settings == ModelSettings(
        temperature=0.3, tool_choice=NamedTool(tool="lookup"), parallel_tool_calls=False
    )
    shown = await agents.get_agent("triage")
    assert shown.definition is not None and shown.definition.model_settings == agent.model_settings
    assert put.agent.revision == 1
    again = await agents.put_agent("triage", {**TRIAGE, "model_settings": settings})
    assert again.changed is False


async def test_dispatch_settings_as_data_reach_the_agent_and_a_bad_one_is_refused_at_its_field() -> None:
    agents = registry()
    allowed: dict[str, Any] = {"allow": ["temperature", "max_output_tokens"], "max_output_tokens": 512}
    await agents.put_agent("triage", {**TRIAGE, "dispatch_settings": allowed})
    agent = await agents.current("triage")
    assert agent.dispatch_settings == DispatchSettings(
        allow={"temperature", "max_output_tokens"}, max_output_tokens=512
    )
    again = await agents.put_agent(
        "triage", {**TRIAGE, "dispatch_settings": {**allowed, "allow": allowed["allow"][::-1]}}
    )
    assert again.changed is False
    with pytest.raises(ChamviValidationError) as refused:
        await agents.put_agent("triage", {**TRIAGE, "dispatch_settings": {"allow": ["max_output_tokens"]}})
    [issue] = refused.value.issues
    assert (
        issue.path == ("dispatch_settings",) and "allowing max_output_tokens needs its cap" in issue.message
    )


@pytest.mark.parametrize(
    ("settings", "model", "path", "code"),
    [
        ({"temperature": 3}, None, ("model_settings", "temperature"), "invalid_setting"),
        ({"top_p": 0}, None, ("model_settings", "top_p"), "invalid_setting"),
        ({"tool_choice": {"tool": "refund"}}, None, ("model_settings", "tool_choice"), "invalid_setting"),
        ({"tool_choice": "lookup"}, None, ("model_settings", "tool_choice"), "value_error"),
        ({"temp": 0.2}, None, ("model_settings", "temp"), "extra_forbidden"),
        ({"max_output_tokens": "many"}, None, ("model_settings", "max_output_tokens"), "int_parsing"),
        ({"extra_body": {"model": "gpt-5"}}, None, ("model_settings", "extra_body"), "invalid_setting"),
        ({"seed": 7}, "anthropic/claude-test", ("model_settings",), "unsupported_setting"),
        ({"temperature": 1.5}, "anthropic/claude-test", ("model_settings",), "unsupported_setting"),
    ],
)
async def test_invalid_model_settings_are_refused_at_their_field(
    settings: dict[str, Any], model: str | None, path: tuple[str | int, ...], code: str
) -> None:
    agents = registry()
    data = {**TRIAGE, "model_settings": settings} | ({"model": model} if model else {})
    with pytest.raises(ChamviValidationError) as refused:
        await agents.put_agent("triage", data)
    issues = [(issue.path, issue.code, issue.message) for issue in refused.value.issues]
    assert (path, code) in [(p, c) for p, c, _ in issues], issues
    if code == "unsupported_setting":
        assert "model 'anthropic/claude-test' does not support it" in issues[0][2]
    assert await agents.store.latest("triage") is None


async def test_an_invalid_name_is_a_validation_issue_at_name() -> None:
    with pytest.raises(ChamviValidationError) as refused:
        await registry().put_agent("Triage_Bot", TRIAGE)
    assert [(i.path, i.code) for i in refused.value.issues] == [(("name",), "agent_name")]


async def test_a_definition_over_the_size_limit_is_refused() -> None:
    with pytest.raises(ChamviValidationError, match="over the limit"):
        await registry().put_agent("triage", {"instructions": "x" * 300_000})


async def test_a_name_held_by_an_agent_in_code_is_refused() -> None:
    agents = registry()
    with pytest.raises(ConflictError, match="defined in code"):
        await agents.put_agent("support", TRIAGE)
    with pytest.raises(ConflictError, match="defined in code"):
        await agents.remove_agent("support")


async def test_without_a_model_a_runtime_agent_takes_the_apps_default() -> None:
    agents = registry()
    await agents.put_agent("triage", TRIAGE)
    agent = await agents.current("triage")
    assert agents.app.model_for(agent)[0] == "local/demo"
    bare = registry(App(agents=[], runtime_tools=[lookup]))
    with pytest.raises(ChamviValidationError) as refused:
        await bare.put_agent("triage", TRIAGE)
    assert [(i.path, i.code) for i in refused.value.issues] == [(("model",), "missing")]


async def test_a_removed_agent_refuses_new_runs_and_keeps_its_revisions() -> None:
    agents = registry()
    await agents.put_agent("triage", TRIAGE)
    assert await agents.remove_agent("triage") == 2
    with pytest.raises(AgentNotFoundError, match="was removed"):
        await agents.current("triage")
    with pytest.raises(AgentNotFoundError):
        await agents.check("triage")
    with pytest.raises(AgentNotFoundError):
        await agents.remove_agent("triage")
    assert (await agents.agent("triage", 1)).revision == 1  # a run on revision 1 goes on
    assert [a.name for a in await agents.list_agents()] == ["support"]
    again = await agents.put_agent("triage", TRIAGE)
    assert (again.agent.revision, again.created) == (3, True)


async def test_a_retried_remove_finds_the_revision_it_wrote() -> None:
    agents = registry()
    await agents.put_agent("triage", TRIAGE)
    assert await agents.remove_agent("triage", request_id="r-1") == 2
    assert await agents.remove_agent("triage", request_id="r-1") == 2


async def test_unknown_agents_and_revisions_are_not_found() -> None:
    agents = registry()
    with pytest.raises(AgentNotFoundError, match="unknown agent 'nosuch': this app serves 'support'"):
        await agents.current("nosuch")
    with pytest.raises(AgentNotFoundError, match="no revision 4"):
        await agents.agent("nosuch", 4)
    with pytest.raises(AgentNotFoundError):
        await agents.get_agent("nosuch")


async def test_trust_overrides_add_to_a_tools_own_trust_and_never_remove_it() -> None:
    agents = registry()
    await agents.put_agent(
        "reader",
        {
            "instructions": "x",
            "tools": ["read_web", "lookup"],
            "trust": {
                "on_tainted": "deny",
                "tools": {"read_web": {"guard_when_tainted": True}, "lookup": {"taint": False}},
            },
        },
    )
    agent = await agents.current("reader")
    web = agent.trust.of(agent.tools["read_web"])
    assert (web.taint, web.guard_when_tainted, agent.trust.on_tainted) == (True, True, "deny")
    assert "lookup" not in agent.trust.tools  # a false adds nothing: the tool's own trust stands


async def test_a_tool_policy_as_data_requires_the_invokers_tool_permission() -> None:
    agents = registry()
    await agents.put_agent("triage", {**TRIAGE, "tool_policy": {"require_permission": True}})
    agent = await agents.current("triage")

    def run(*permissions: str) -> PolicyRun:
        invoker = Invoker(id="u", kind="token", permissions=list(permissions))
        return PolicyRun("r", "triage", TriggerEnvelope(invoker=invoker))

    assert agent.allows("lookup", run("tool:triage:lookup"))
    assert not agent.allows("lookup", run("runs:dispatch"))
    assert not agent.allows("lookup", PolicyRun("r", "triage", TriggerEnvelope()))


async def test_mcp_servers_of_the_catalog_reach_the_agent() -> None:
    agents = registry()
    await agents.put_agent("dev", {"instructions": "x", "mcp_servers": ["gh"]})
    assert (await agents.current("dev")).mcp_servers == ("gh",)


async def test_a_listing_shows_code_agents_then_runtime_agents_with_their_revisions() -> None:
    agents = registry()
    await agents.put_agent("triage", TRIAGE)
    await agents.put_agent("triage", {**TRIAGE, "description": "Labels issues."})
    await agents.put_agent("billing", {"instructions": "Bill.", "model": "local/demo"})
    listed = [(a.name, a.kind, a.revision) for a in await agents.list_agents()]
    assert listed == [("support", "code", None), ("billing", "runtime", 1), ("triage", "runtime", 2)]
    shown = await agents.get_agent("triage")
    assert shown.definition is not None and shown.description == "Labels issues."
    assert (await agents.get_agent("triage", 1)).definition == shown.definition.model_copy(
        update={"description": None}
    )
    assert (await agents.get_agent("support")).tools == ["internal"]


async def test_who_put_a_revision_is_kept_without_their_permissions() -> None:
    agents = registry()
    by = Invoker(id="ci", kind="token", permissions=["agents:write"])
    put = await agents.put_agent("triage", TRIAGE, by=by)
    assert put.agent.by == Invoker(id="ci", kind="token")


async def test_another_process_sees_a_put_once_its_latest_read_is_stale() -> None:
    store = ObjectRevisionStore.memory()
    writer, reader = registry(store=store), registry(store=store, fresh=timedelta(milliseconds=50))
    with pytest.raises(AgentNotFoundError):
        await reader.current("triage")
    await writer.put_agent("triage", TRIAGE)
    with pytest.raises(AgentNotFoundError):  # within the short cache, the old answer stands
        await reader.current("triage")
    await asyncio.sleep(0.06)
    assert (await reader.current("triage")).revision == 1


async def test_racing_puts_from_two_processes_take_distinct_revisions(tmp_path: Path) -> None:
    folder = ArtifactStore.local(tmp_path)
    stores = [ObjectRevisionStore(folder.store, str(tmp_path)) for _ in range(2)]
    one, two = registry(store=stores[0]), registry(store=stores[1])
    puts = await asyncio.gather(
        *(
            agents.put_agent("triage", {**TRIAGE, "instructions": f"Version {n} of {side}."})
            for n in range(6)
            for side, agents in (("one", one), ("two", two))
        )
    )
    assert sorted(p.agent.revision or 0 for p in puts) == list(range(1, 13))
    revisions = [await stores[0].read("triage", n) for n in range(1, 13)]
    assert len({r.definition.instructions for r in revisions if r and r.definition}) == 12


async def test_a_revision_whose_tool_left_the_catalog_still_serves_its_runs() -> None:
    store = ObjectRevisionStore.memory()
    await registry(store=store).put_agent("triage", {"instructions": "x", "tools": ["lookup", "refund"]})
    deployed = App(agents=[], model="local/demo", runtime_tools=[lookup])  # refund is gone
    agents = registry(deployed, store)
    assert list((await agents.agent("triage", 1)).tools) == ["lookup"]  # a run under way goes on
    with pytest.raises(ChamviValidationError, match="refund"):  # a new run is refused, naming it
        await agents.current("triage")


async def test_a_revision_whose_named_tool_left_the_catalog_serves_its_runs_without_its_settings() -> None:
    store = ObjectRevisionStore.memory()
    data = {
        "instructions": "x",
        "tools": ["lookup", "refund"],
        "model_settings": {"tool_choice": {"tool": "refund"}},
    }
    await registry(store=store).put_agent("triage", data)
    deployed = App(agents=[], model="local/demo", runtime_tools=[lookup])
    going_on = await registry(deployed, store).agent("triage", 1)
    assert (list(going_on.tools), going_on.model_settings) == (["lookup"], None)


async def test_a_worker_runtime_describes_a_runtime_agent_at_its_latest_revision() -> None:
    runtime = AppRuntime(make_app())
    await runtime.agents.put_agent("triage", TRIAGE)
    await runtime.agents.put_agent("triage", {**TRIAGE, "tools": ["lookup", "read_web"]})
    spec = await runtime.describe("triage", PolicyRun("run-1", "triage", TriggerEnvelope()))
    assert (spec.revision, [t.name for t in spec.tools], spec.model) == (
        2,
        ["lookup", "read_web"],
        "local/demo",
    )
    assert [t.taint for t in spec.tools] == [False, True]
    code = await runtime.describe("support", None)
    assert code.revision is None and "revision" not in code.model_dump(mode="json")


@pytest.mark.parametrize(
    ("catalog", "match"),
    [
        ([lookup, lookup], "two tools named 'lookup'"),
        ([*mcp_tools("jira")], "does not declare"),
        (["lookup"], "not a tool"),
    ],
)
def test_the_apps_runtime_tool_catalog_refuses_mistakes(catalog: list[Tool], match: str) -> None:
    with pytest.raises(InvalidAppError, match=match):
        App(agents=[], runtime_tools=catalog)


async def test_the_examples_runtime_agent_is_valid_for_the_example_app() -> None:
    import yaml

    from examples.support.app import app

    data = yaml.safe_load((Path(__file__).parents[2] / "examples/support/agents/faq.yaml").read_text())
    put = await registry(app).put_agent(data["name"], data)
    assert (put.agent.name, put.agent.tools, put.created) == ("faq", ["knowledge_search"], True)


async def test_a_worker_remembers_a_bounded_number_of_latest_reads() -> None:
    agents = registry(kept=4)
    for n in range(20):
        with pytest.raises(AgentNotFoundError):
            await agents.check(f"nosuch-{n}")
    assert len(agents._latest) == 4


def test_a_plugin_given_a_revision_store_keeps_it_when_its_worker_opens_the_artifact_store() -> None:
    from chamvi._lifecycle import memory_index
    from chamvi.plugin import ChamviPlugin

    store = ObjectRevisionStore.memory()
    plugin = ChamviPlugin(
        make_app(), index=memory_index(), artifacts=ArtifactStore.memory(), agent_revisions=store
    )
    plugin._with_activities(None)  # what a worker's configuration does: opens the stores
    assert plugin.runtime.agents.store is store
    default = ChamviPlugin(make_app(), index=memory_index(), artifacts=ArtifactStore.memory())
    default._with_activities(None)
    assert isinstance(default.runtime.agents.store, ObjectRevisionStore)
    assert default.runtime.agents.store.store is default.artifacts.store
