"""Retry policies are the app's and the tool's, decided by error codes, not at raise sites."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
from temporalio.common import RetryPolicy

from chamvi import ActivityTimeouts, App, ChamviClient, RetryPolicies, RunStatus, define_agent, tool
from chamvi.providers import ModelRegistry, OpenAIProvider, ScriptedModel, call, reply
from tests.conftest import RunningWorker
from tests.support.openai_server import OpenAIServer, error, text


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


@tool
async def noop() -> str:
    """Does nothing."""
    return "ok"


def openai_app(server: OpenAIServer, retry: RetryPolicies) -> App:
    models = ModelRegistry(
        providers={"openai": OpenAIProvider(api_key="test", base_url=server.url + "/v1").model}
    )
    agent = define_agent(name="adder", model="openai/test-model", instructions="Add.", tools=[noop])
    return App(agents=[agent], models=models, retry=retry)


async def test_the_apps_model_policy_decides_how_often_an_unavailable_provider_is_tried(
    chamvi: ChamviClient, running_worker: RunningWorker, server: OpenAIServer
) -> None:
    server.add(error(503, "overloaded"), error(503, "overloaded"), text("never sent"))
    once = RetryPolicies(model=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=100)))

    async with running_worker(openai_app(server, once)):
        run = await chamvi.wait((await chamvi.dispatch("adder", {})).run_id)

    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.code == "provider_unavailable"
    assert "503" in run.error.message and "overloaded" in run.error.message
    assert len(server.requests) == 2 and server.pending == 1


attempts: list[int] = []


@tool(retry=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=100)))
async def stuck() -> str:
    """Never answers in time."""
    attempts.append(1)
    await asyncio.sleep(30)
    return "late"


async def test_a_tools_own_retry_policy_bounds_a_call_that_keeps_timing_out(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    attempts.clear()
    model = ScriptedModel([call("stuck"), reply("never reached")])
    agent = define_agent(name="waiter", model="scripted/stuck", instructions="x", tools=[stuck])
    app = App(
        agents=[agent],
        models=ModelRegistry(models={"scripted/stuck": model}),
        timeouts=ActivityTimeouts(tool=timedelta(seconds=1)),
    )

    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("waiter", {})).run_id)

    assert run.status == RunStatus.FAILED and run.error is not None
    assert (run.error.code, run.error.message) == ("activity_failed", "activity StartToClose timeout")
    assert len(attempts) == 2


def test_the_defaults_are_todays_values_and_tool_retries_are_bounded() -> None:
    spec = App(agents=[define_agent(name="a", model="local/demo", instructions="x", tools=[noop])]).spec("a")
    assert spec.model_retry is not None and spec.tool_retry is not None
    assert (spec.model_retry.maximum_attempts, spec.model_retry.maximum_interval_seconds) == (10, 60.0)
    assert spec.tool_retry.maximum_attempts == 10 and spec.tool_retry.maximum_interval_seconds == 30.0
    assert spec.tools[0].retry is None
