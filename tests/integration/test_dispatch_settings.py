"""What a dispatch may set of its run's model settings: only what the agent allows, within its caps.

A token with only ``runs:dispatch`` could set any model setting of a run (``n: 128`` and a priority
tier through ``extra_body``, 10^9 output tokens). The agent's ``dispatch_settings`` now say which a
dispatch may set; the rest is refused at dispatch (a worker checks, over HTTP and through the
client and the CLI alike), and a run started past that check fails at its first model step, before
any request.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from temporalio.client import Client

from chamvi import App, ChamviClient, DispatchSettings, RunStatus, define_agent
from chamvi.cli import cli
from chamvi.errors import ChamviValidationError, InvalidInputError
from chamvi.http import create_api
from chamvi.models import ModelSettings, RunInput
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from chamvi.runtime import build_worker
from tests.support.http_api import bearer, make_tokens, serving

CAPPED = DispatchSettings(allow={"temperature", "max_output_tokens"}, max_output_tokens=256)


def make_app(capped: str, plain: str) -> tuple[App, ScriptedModel]:
    """``capped`` lets a dispatch set the temperature and up to 256 output tokens; ``plain``, the default."""
    model = ScriptedModel([reply("done")], repeat_last=True)
    models = ModelRegistry()
    models.register("scripted/settings", model)
    agents = [
        define_agent(
            name=capped, model="scripted/settings", instructions="Answer.", dispatch_settings=CAPPED
        ),
        define_agent(name=plain, model="scripted/settings", instructions="Answer."),
    ]
    return App(agents=agents, models=models), model


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"capped-{suffix}", f"plain-{suffix}"


def refusal(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_a_dispatch_token_sets_only_the_settings_the_agent_allows_within_their_caps(
    client: Client, task_queue: str
) -> None:
    capped, plain = names()
    app, model = make_app(capped, plain)
    tokens = make_tokens(dispatcher=["runs:dispatch"])
    runs = ChamviClient(client, task_queue=task_queue)
    api = create_api(tokens=list(tokens.values()), managed=None, runs=runs, agents=list(app.agents))
    dispatcher = bearer(tokens["dispatcher"])

    async def post(agent: str, settings: dict[str, Any]) -> httpx.Response:
        return await http.post("/runs", json={"agent": agent, "model_settings": settings}, headers=dispatcher)

    async with (
        build_worker(client, app, task_queue=task_queue),
        serving(api) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        huge = await post(capped, {"max_output_tokens": 1_000_000_000})
        tier = await post(capped, {"service_tier": "priority", "tool_choice": "none"})
        extras = await post(capped, {"extra_body": {"n": 128, "service_tier": "priority"}})
        overriding = await post(capped, {"temperature": 0.1, "extra_body": {"temperature": 2}})
        by_default = await post(plain, {"max_output_tokens": 10})
        allowed = await post(capped, {"temperature": 0.5, "max_output_tokens": 200})
        assert allowed.status_code == 202, allowed.text
        run = await runs.wait(allowed.json()["run_id"])

    error = refusal(huge)
    assert error["code"] == "validation_error"
    assert error["issues"] == [
        {
            "path": ["model_settings", "max_output_tokens"],
            "message": f"max_output_tokens is 1000000000: agent {capped!r} lets a dispatch ask for at "
            "most 256",
            "code": "setting_over_cap",
        }
    ]
    error = refusal(tier)
    assert error["code"] == "validation_error"
    assert f"agent {capped!r} does not let a dispatch set 'tool_choice', 'service_tier'" in error["message"]
    assert "a dispatch may set 'max_output_tokens', 'temperature'" in error["message"]
    assert [i["path"] for i in error["issues"]] == [
        ["model_settings", "tool_choice"],
        ["model_settings", "service_tier"],
    ]
    error = refusal(extras)
    assert "extra_body sets 'n', which the call itself sends" in error["message"]
    assert "extra_body sets 'service_tier', which model settings check" in error["message"]
    error = refusal(overriding)
    assert (
        "extra_body sets 'temperature', which model settings check: give temperature= instead"
        in (error["message"])
    )
    error = refusal(by_default)
    assert error["code"] == "validation_error"
    assert "a dispatch may set 'seed', 'stop', 'temperature', 'top_p'" in error["message"]
    assert run.status == RunStatus.COMPLETED, run.error
    assert [r.settings for r in model.requests] == [ModelSettings(temperature=0.5, max_output_tokens=200)]


async def test_the_client_refuses_settings_the_agent_does_not_allow_and_starts_nothing(
    chamvi: ChamviClient, running_worker
) -> None:
    capped, plain = names()
    app, model = make_app(capped, plain)
    async with running_worker(app):
        with pytest.raises(ChamviValidationError) as raised:
            await chamvi.dispatch(capped, model_settings={"reasoning_effort": "max"}, idempotency_key="once")
        # the same key starts a run now: the refused dispatch started none
        allowed = await chamvi.dispatch(capped, model_settings={"temperature": 1}, idempotency_key="once")
        run = await chamvi.wait(allowed.run_id)

    refused = raised.value
    assert refused.code == "validation_error"
    assert f"agent {capped!r} does not let a dispatch set 'reasoning_effort'" in refused.message
    assert [i.path for i in refused.issues] == [("model_settings", "reasoning_effort")]
    assert allowed.created and run.status == RunStatus.COMPLETED, run.error
    assert [r.settings for r in model.requests] == [ModelSettings(temperature=1)]


async def test_a_run_started_past_the_dispatch_check_fails_before_any_model_request(
    chamvi: ChamviClient, running_worker
) -> None:
    capped, plain = names()
    app, model = make_app(capped, plain)
    async with running_worker(app):
        started = await chamvi.start(
            RunInput(agent=plain, model_settings=ModelSettings(max_output_tokens=1_000_000_000))
        )
        run = await chamvi.wait(started.run_id)

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "model_error"
    assert f"agent {plain!r} does not let a dispatch set 'max_output_tokens'" in run.error.message
    assert model.requests == []


async def test_extra_body_that_sets_a_checked_field_is_refused_before_the_run_starts(
    chamvi: ChamviClient,
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await chamvi.dispatch("any-agent", model_settings={"extra_body": {"tool_choice": "none"}})
    assert "extra_body sets 'tool_choice', which model settings check: give tool_choice= instead" in (
        raised.value.message
    )


async def test_the_cli_dispatches_with_allowed_settings_and_refuses_the_rest_with_the_same_error(
    client: Client, task_queue: str, chamvi: ChamviClient, running_worker, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    capped, plain = names()
    app, model = make_app(capped, plain)
    where = [
        "--address", client.service_client.config.target_host,
        "--namespace", client.namespace,
        "--task-queue", task_queue,
    ]  # fmt: skip

    def chamvi_cli(*args: str) -> Any:
        return asyncio.to_thread(CliRunner().invoke, cli, [*args, *where])

    async with running_worker(app):
        refused = await chamvi_cli("dispatch", capped, "--model-settings", '{"max_output_tokens": 100000}')
        not_json = await chamvi_cli("dispatch", capped, "--model-settings", "hot")
        allowed = await chamvi_cli("dispatch", capped, "--model-settings", '{"temperature": 0.3}', "--json")
        run = await chamvi.wait(json.loads(allowed.output)["run_id"])

    assert refused.exit_code == 1
    assert (
        f"max_output_tokens is 100000: agent {capped!r} lets a dispatch ask for at most 256" in refused.output
    )
    assert not_json.exit_code == 1 and "--model-settings is not valid JSON" in not_json.output
    assert allowed.exit_code == 0, allowed.output
    assert run.status == RunStatus.COMPLETED, run.error
    assert [r.settings for r in model.requests] == [ModelSettings(temperature=0.3)]
