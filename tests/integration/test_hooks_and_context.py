"""Agent hooks around tool calls, and values provided to tools through context keys."""

from __future__ import annotations

from typing import Any

from chamvi import (
    AgentHooks,
    App,
    ChamviClient,
    RunStatus,
    ToolCallInfo,
    ToolContext,
    ToolDeniedError,
    approve,
    define_agent,
    define_context_key,
    inject,
    tool,
)
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.polling import until_status


class Deployer:
    def __init__(self) -> None:
        self.deployed: list[str] = []

    def deploy(self, version: str) -> str:
        self.deployed.append(version)
        return f"deployed {version}"


DEPLOYER = define_context_key("deployer")
MISSING = define_context_key("missing")


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys through the provided client."""
    return inject(ctx, DEPLOYER).deploy(version)


@tool
async def rollback(ctx: ToolContext) -> str:
    """Needs a client nobody provided."""
    return str(inject(ctx, MISSING))


async def before(info: ToolCallInfo, ctx: ToolContext) -> dict[str, Any]:
    if info.tool_name == "rollback":
        raise ToolDeniedError("rollbacks are done by hand")
    decision = await approve(ctx, title=f"Deploy {info.input['version']}?")
    if not decision.approved:
        raise ToolDeniedError("deploy denied")
    return {"version": info.input["version"].strip()}


def after(info: ToolCallInfo, output: Any, ctx: ToolContext) -> Any:
    return f"{output} (checked by hook)"


def make_app(turns: list, hooks: AgentHooks | None = None) -> tuple[App, Deployer]:
    models = ModelRegistry()
    models.register("scripted/ops", ScriptedModel(turns))
    app = App(
        agents=[
            define_agent(
                name="ops", model="scripted/ops", instructions="Ops.", tools=[deploy, rollback], hooks=hooks
            )
        ],
        models=models,
    )
    deployer = Deployer()
    app.provide(DEPLOYER, deployer)
    return app, deployer


async def test_hooks_gate_rewrite_and_wrap_tool_calls(chamvi: ChamviClient, running_worker) -> None:
    app, deployer = make_app(
        [call("deploy", version=" 2.1 "), call("rollback"), reply("ok")],
        AgentHooks(before_tool_execution=before, after_tool_execution=after),
    )
    async with running_worker(app):
        run_id = (await chamvi.dispatch("ops")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id)
        run = await chamvi.wait(run_id)
    assert deployer.deployed == ["2.1"]
    tools = [s for s in run.steps if s.kind == "tool"]
    assert tools[0].output == "deployed 2.1 (checked by hook)"
    assert tools[1].error is not None and tools[1].error.code == "tool_denied"


async def test_a_missing_context_value_is_a_tool_error_naming_the_key(
    chamvi: ChamviClient, running_worker
) -> None:
    app, _ = make_app([call("rollback"), reply("ok")])
    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("ops")).run_id)
    error = next(s for s in run.steps if s.kind == "tool").error
    assert error is not None and error.code == "context_not_provided" and "'missing'" in error.message
