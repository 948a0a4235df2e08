"""An agent whose tool set is built per run from who and where the run comes from."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chamvi import AgentTrust, App, ChamviClient, Invoker, RunStatus, Tool, Trust, define_agent, tool
from chamvi.errors import InvalidAgentDefinitionError
from chamvi.models import TriggerEnvelope
from chamvi.permissions import PolicyRun
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
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


def by_invoker(run: PolicyRun) -> Sequence[Tool]:
    built_for.append(run.run_id)
    invoker = run.trigger.invoker
    return [lookup, refund] if invoker is not None and invoker.kind == "staff" else [lookup]


def desk(model: ScriptedModel) -> App:
    models = ModelRegistry()
    models.register("scripted/desk", model)
    agent = define_agent(name="desk", model="scripted/desk", instructions="x", tools=by_invoker)
    return App(agents=[agent], models=models)


async def test_a_factory_builds_each_runs_tools_from_its_invoker_once_per_run(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    built_for.clear()
    turns = [call("refund", order_id="A1"), reply("done")]
    customer_model, staff_model = ScriptedModel(turns), ScriptedModel(turns)

    async with running_worker(desk(customer_model)):
        customer = await chamvi.wait(
            (await chamvi.dispatch("desk", {}, invoker=Invoker(id="c-1", kind="customer"))).run_id
        )
    async with running_worker(desk(staff_model)):
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
    def broken(run: PolicyRun) -> Sequence[Tool]:
        raise KeyError("catalogue")

    models = ModelRegistry()
    models.register("scripted/broken", ScriptedModel([reply("never")]))
    agent = define_agent(name="broken", model="scripted/broken", instructions="x", tools=broken)
    app = App(agents=[agent], models=models)
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("broken", {})).run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.code == "invalid_agent_definition"
    assert "agent 'broken': its tool factory failed" in run.error.message


def test_a_factory_agents_trust_names_are_checked_against_the_tools_it_builds() -> None:
    agent = define_agent(
        name="desk",
        model="local/demo",
        instructions="x",
        tools=lambda run: [lookup],
        trust=AgentTrust(tools={"refund": Trust(taint=True)}),
    )
    with pytest.raises(InvalidAgentDefinitionError, match="trust names tools it does not have: 'refund'"):
        agent.build_tools(PolicyRun("r", "desk", TriggerEnvelope()))
