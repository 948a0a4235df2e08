"""Skills of agents defined at runtime: the App's defaults, and a definition that names skills refused."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from chamvi import App, define_agent, tool
from chamvi._constants import TOOL_SKILL_LOAD, TOOL_SKILL_READ
from chamvi._tool_runner import ToolRunner
from chamvi.errors import ChamviValidationError, InvalidAppError
from chamvi.http import Token, create_api
from chamvi.models import ToolCall, ToolRequest, TriggerEnvelope
from chamvi.permissions import PolicyRun
from chamvi.skills import skill
from chamvi.worker_state import AppRuntime
from tests.unit.test_tool_runner import InMemoryRun

TONE = skill(name="tone", description="How to write to customers.", instructions="Be brief.")
REFUNDS = skill(name="refunds", description="How to refund.", instructions="Refund the total.")


@tool
async def lookup(order_id: str) -> str:
    """Looks an order up."""
    return order_id


def make_app(**options: Any) -> App:
    support = define_agent(name="support", model="local/demo", instructions="Help.", skills=[REFUNDS])
    return App(agents=[support], model="local/demo", runtime_tools=[lookup], **options)


TRIAGE: dict[str, Any] = {"instructions": "Triage.", "tools": ["lookup"]}


def started(name: str) -> PolicyRun:
    return PolicyRun("run-1", name, TriggerEnvelope())


async def test_a_runtime_agent_has_the_apps_default_skills_and_the_skill_tools() -> None:
    runtime = AppRuntime(make_app(skills=[TONE]))
    await runtime.agents.put_agent("triage", TRIAGE)
    spec = await runtime.describe("triage", started("triage"))
    triage = await runtime.agent("triage", spec.revision)
    catalog = await runtime.skills.current(triage)
    assert catalog is not None and [s.name for s in catalog.skills] == ["tone"]
    assert spec.revision == 1 and spec.skills_version == catalog.version
    assert [t.name for t in spec.tools] == ["lookup", TOOL_SKILL_LOAD, TOOL_SKILL_READ]
    support = await runtime.describe("support", started("support"))
    assert support.skills_version not in (None, catalog.version)  # the defaults, then its own
    messages = await runtime.instructions_for(triage, spec.skills_version)
    assert messages[0].content == "Triage." and "<name>tone</name>" in (messages[-1].content or "")
    loaded = await ToolRunner(runtime).run(
        ToolRequest(
            run_id="run-1",
            agent="triage",
            step=0,
            call=ToolCall(id="call-1", name=TOOL_SKILL_LOAD, arguments={"name": "tone"}),
            trigger=TriggerEnvelope(),
            revision=spec.revision,
            skills_version=spec.skills_version,
        ),
        InMemoryRun(),
        asyncio.Event(),
    )
    assert loaded.status == "ok" and loaded.output["instructions"] == "Be brief."


async def test_a_runtime_agent_of_an_app_without_default_skills_has_none() -> None:
    runtime = AppRuntime(make_app())
    await runtime.agents.put_agent("triage", TRIAGE)
    spec = await runtime.describe("triage", started("triage"))
    assert spec.skills_version is None and [t.name for t in spec.tools] == ["lookup"]


async def test_a_runtime_definition_naming_skills_is_refused_saying_where_skills_come_from() -> None:
    runtime = AppRuntime(make_app(skills=[TONE]))
    with pytest.raises(ChamviValidationError) as refused:
        await runtime.agents.put_agent("triage", {**TRIAGE, "skills": ["refunds"]})
    [issue] = refused.value.issues
    assert (issue.path, issue.code) == (("skills",), "skills_not_supported")
    assert issue.message.startswith("a runtime agent cannot name skills: it has the App's default skills")
    assert await runtime.agents.store.latest("triage") is None


async def test_a_runtime_agents_trust_classifies_the_skill_tools_only_when_the_app_has_skills() -> None:
    tainting = {**TRIAGE, "trust": {"tools": {TOOL_SKILL_LOAD: {"taint": True}}}}
    runtime = AppRuntime(make_app(skills=[TONE]))
    await runtime.agents.put_agent("triage", tainting)
    triage = await runtime.agents.current("triage")
    assert triage.trust.tools[TOOL_SKILL_LOAD].taint
    bare = AppRuntime(make_app())
    with pytest.raises(ChamviValidationError) as refused:
        await bare.agents.put_agent("triage", tainting)
    assert [(i.path, i.code) for i in refused.value.issues] == [
        (("trust", "tools", TOOL_SKILL_LOAD), "unknown_tool")
    ]


def test_runtime_tools_under_a_skill_tools_name_fail_the_boot_of_an_app_with_skills() -> None:
    @tool(name=TOOL_SKILL_LOAD)
    async def impostor(name: str) -> str:
        """Not the skill tool."""
        return name

    with pytest.raises(InvalidAppError, match="runtime_tools holds a tool named 'skill_load', the name of a"):
        App(agents=[], model="local/demo", runtime_tools=[impostor], skills=[TONE])
    App(agents=[], model="local/demo", runtime_tools=[impostor])  # without skills, the name is free


async def test_get_agent_skills_answers_a_runtime_agents_default_skills() -> None:
    runtime = AppRuntime(make_app(skills=[TONE]))
    await runtime.agents.put_agent("triage", TRIAGE)
    tokens = [Token(value="reader", id="r", permissions=("agents:read",))]
    api = create_api(
        tokens=tokens, managed=None, runs=None, skills=runtime.skills, agent_directory=runtime.agents
    )
    auth = {"Authorization": "Bearer reader"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api") as http:
        triage = await http.get("/agents/triage/skills", headers=auth)
        support = await http.get("/agents/support/skills", headers=auth)
        nobody = await http.get("/agents/nobody/skills", headers=auth)
    assert triage.status_code == 200, triage.text
    assert [s["name"] for s in triage.json()["skills"]] == ["tone"]
    assert [s["name"] for s in support.json()["skills"]] == ["tone", "refunds"]
    assert nobody.status_code == 404
