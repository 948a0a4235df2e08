"""An agent whose tool set is built per run by a factory, from the run's tool context."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from chamvi import (
    AgentTrust,
    App,
    ChamviClient,
    Invoker,
    RunStatus,
    Tool,
    ToolContext,
    ToolFactoryContext,
    Trust,
    console_channel,
    define_agent,
    define_context_key,
    inject,
    tool,
)
from chamvi.errors import InvalidAgentDefinitionError, InvalidRunStateError
from chamvi.models import TriggerEnvelope
from chamvi.permissions import PolicyRun
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.worker_state import AppRuntime
from tests.conftest import RunningWorker

built_for: list[str] = []


@tool
async def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"order {order_id}"


@tool
async def refund(order_id: str) -> str:
    """Refunds an order."""
    return f"refunded {order_id}"


def by_invoker(ctx: ToolFactoryContext) -> Sequence[Tool]:
    built_for.append(ctx.run.run_id)
    invoker = ctx.run.trigger.invoker
    return [lookup, refund] if invoker is not None and invoker.kind == "staff" else [lookup]


def scripted_app(name: str, model: ScriptedModel, **agent: object) -> App:
    models = ModelRegistry()
    models.register(f"scripted/{name}", model)
    return App(
        agents=[define_agent(name=name, model=f"scripted/{name}", instructions="x", **agent)],  # type: ignore[arg-type]
        models=models,
    )


async def test_a_factory_builds_each_runs_tools_from_its_invoker_once_per_run(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    built_for.clear()
    turns = [call("refund", order_id="A1"), reply("done")]
    customer_model, staff_model = ScriptedModel(turns), ScriptedModel(turns)

    async with running_worker(scripted_app("desk", customer_model, tools=by_invoker)):
        customer = await chamvi.wait(
            (await chamvi.dispatch("desk", {}, invoker=Invoker(id="c-1", kind="customer"))).run_id
        )
    async with running_worker(scripted_app("desk", staff_model, tools=by_invoker)):
        staff = await chamvi.wait(
            (await chamvi.dispatch("desk", {}, invoker=Invoker(id="s-1", kind="staff"))).run_id
        )

    assert [t.name for t in customer_model.requests[0].tools] == ["lookup"]
    refused = next(s for s in customer.steps if s.kind == "tool")
    assert refused.error is not None and refused.error.code == "tool_not_allowed"
    assert "this agent offers 'lookup'" in refused.error.message
    assert [t.name for t in staff_model.requests[0].tools] == ["lookup", "refund"]
    assert next(s for s in staff.steps if s.kind == "tool").output == "refunded A1"
    assert customer.status == staff.status == RunStatus.COMPLETED
    assert built_for == [customer.run_id, staff.run_id]  # once per run and worker, not per step


async def test_a_failing_factory_fails_the_run_at_once_naming_the_agent(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    def broken(ctx: ToolFactoryContext) -> Sequence[Tool]:
        raise KeyError("catalogue")

    async with running_worker(scripted_app("broken", ScriptedModel([reply("never")]), tools=broken)):
        run = await chamvi.wait((await chamvi.dispatch("broken", {})).run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.code == "invalid_agent_definition"
    assert "agent 'broken': its tool factory failed" in run.error.message


class Loop(BaseModel):
    title: str


async def test_a_factory_builds_tools_over_the_agents_state_as_the_seeds_state_form_does(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    def loops(ctx: ToolFactoryContext) -> Sequence[Tool]:
        state = ctx.state  # the seed's `tools: ({ state }) => ...`

        @tool
        async def count_loops() -> int:
            """How many loops are open."""
            return len((await state.collection("loops").list()).items)

        return [count_loops]

    model = ScriptedModel(
        [
            call("state_loops_upsert", "c1", key="a", item={"title": "call back"}),
            call("count_loops", "c2"),
            reply("one loop"),
        ]
    )
    async with running_worker(scripted_app("digest", model, tools=loops, state={"loops": Loop})):
        run = await chamvi.wait((await chamvi.dispatch("digest", {})).run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert [s.output for s in run.steps if s.tool == "count_loops"] == [1]


DEPLOY = define_context_key("deploy")


def deploy_tools(ctx: ToolFactoryContext) -> Sequence[Tool]:
    region = inject(ctx, DEPLOY)  # read when the run's tools are built

    @tool
    async def deploy(version: str) -> str:
        """Deploys a version."""
        return f"{version} to {region}"

    return [deploy]


async def test_inject_in_a_factory_reads_what_the_app_provides(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    app = scripted_app("ops", ScriptedModel([call("deploy", version="1.2"), reply("ok")]), tools=deploy_tools)
    app.provide(DEPLOY, "eu-west")
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("ops", {})).run_id)
    assert [s.output for s in run.steps if s.kind == "tool"] == ["1.2 to eu-west"]


async def test_a_value_the_factory_injects_but_nobody_provided_fails_the_run_before_any_model_call(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    model = ScriptedModel([reply("never")])
    async with running_worker(scripted_app("ops", model, tools=deploy_tools)):
        run = await chamvi.wait((await chamvi.dispatch("ops", {})).run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.code == "context_not_provided"
    assert "'deploy'" in run.error.message
    assert model.requests == [] and run.steps == []


class CrmConfig(BaseModel):
    region: str


@tool(context_schema=CrmConfig)
async def crm_lookup(customer: str, ctx: ToolContext) -> str:
    """Looks a customer up in the CRM."""
    return f"{customer} in {ctx.tool_context.region}"


async def test_a_factory_agents_tools_context_reaches_the_tool_it_built(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    model = ScriptedModel([call("crm_lookup", customer="ada"), reply("found")])
    app = scripted_app(
        "crm", model, tools=lambda ctx: [crm_lookup], tools_context={"crm_lookup": {"region": "eu"}}
    )
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("crm", {})).run_id)
    assert [s.output for s in run.steps if s.kind == "tool"] == ["ada in eu"]


@pytest.mark.parametrize(
    ("tools_context", "code", "says"),
    [
        ({"crm_search": {"region": "eu"}}, "invalid_agent_definition", "tools_context names 'crm_search'"),
        ({"crm_lookup": {"zone": "eu"}}, "validation_error", "region: Field required"),
    ],
)
async def test_a_factory_agents_tools_context_that_misses_what_it_built_fails_the_run(
    chamvi: ChamviClient,
    running_worker: RunningWorker,
    tools_context: dict[str, object],
    code: str,
    says: str,
) -> None:
    model = ScriptedModel([reply("never")])
    app = scripted_app("crm", model, tools=lambda ctx: [crm_lookup], tools_context=tools_context)
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("crm", {})).run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert (run.error.code, model.requests) == (code, [])
    assert says in run.error.message and "'zone'" not in run.error.message


def test_a_factory_agents_trust_names_are_checked_against_the_tools_it_builds() -> None:
    agent = define_agent(
        name="desk",
        model="local/demo",
        instructions="x",
        tools=lambda ctx: [lookup],
        trust=AgentTrust(tools={"refund": Trust(taint=True)}),
    )
    runtime = AppRuntime(App(agents=[agent]))
    with pytest.raises(InvalidAgentDefinitionError, match="trust names tools it does not have: 'refund'"):
        runtime.run_tools(agent, PolicyRun("r", "desk", TriggerEnvelope()))


@pytest.mark.parametrize(
    "misuse",
    [
        lambda ctx: ctx.channels.find_one_or_fail("console").emit("hello"),
        lambda ctx: ctx.channels.find_one_or_fail("console").approve(title="Go?"),
        lambda ctx: ctx.artifacts.put("text/plain", "x"),
    ],
    ids=["emit", "approve", "artifacts.put"],
)
def test_sending_or_putting_from_the_factory_outside_a_tool_call_is_an_invalid_run_state(
    misuse: object,
) -> None:
    def factory(ctx: ToolFactoryContext) -> Sequence[Tool]:
        misuse(ctx)  # type: ignore[operator]
        return [lookup]

    agent = define_agent(
        name="desk", model="local/demo", instructions="x", tools=factory, channels=["console"]
    )
    runtime = AppRuntime(App(agents=[agent], channels=[console_channel()]))
    with pytest.raises(InvalidRunStateError, match="from the tools factory"):
        runtime.run_tools(agent, PolicyRun("r", "desk", TriggerEnvelope(channel="console")))
