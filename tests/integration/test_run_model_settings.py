"""A run's own model settings, given at dispatch, over its agent's; and a runtime agent's as data.

"Per call" here is per run: ``dispatch(model_settings=...)`` (``POST /runs`` takes the same field)
sets what each model step of that run sends, field by field over the agent's, and each step records
what it sent. An extraction keeps the agent's settings and its own (``extract(model_settings=...)``).
Over real HTTP: a loopback OpenAI-compatible server and a loopback Anthropic Messages server.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, DispatchSettings, RunStatus, define_agent, tool
from chamvi.errors import InvalidInputError
from chamvi.http import create_api
from chamvi.models import ModelSettings, NamedTool
from chamvi.providers import AnthropicProvider, openai_compatible
from chamvi.runtime import build_worker, local_plugin
from tests.support.anthropic_server import AnthropicServer, tool_use
from tests.support.anthropic_server import text as claude_text
from tests.support.http_api import bearer, make_tokens, serving
from tests.support.openai_server import OpenAIServer, text, tool_call


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


TOKENS = make_tokens(writer=["agents:write", "agents:read", "runs:dispatch", "runs:read"])


async def test_a_runtime_agent_s_settings_and_the_run_s_own_reach_the_wire_over_http(
    client: Client, task_queue: str
) -> None:
    with OpenAIServer() as vllm:
        vllm.add(tool_call("add", {"a": 2, "b": 3}), text("5"))
        app = App(
            agents=[],
            models=[openai_compatible("vllm", base_url=vllm.url + "/v1")],
            runtime_tools=[add],
        )
        plugin = local_plugin(app)
        runs = ChamviClient(client, task_queue=task_queue)
        api = create_api(
            tokens=list(TOKENS.values()), managed=None, runs=runs, agent_directory=plugin.runtime.agents
        )
        writer = bearer(TOKENS["writer"])
        definition: dict[str, Any] = {
            "model": "vllm/qwen3",
            "instructions": "Add.",
            "tools": ["add"],
            "model_settings": {"temperature": 0.2, "tool_choice": {"tool": "add"}, "seed": 7},
            "dispatch_settings": {
                "allow": ["temperature", "top_p", "max_output_tokens", "extra_body"],
                "max_output_tokens": 64,
            },
        }
        own = {"temperature": 0.9, "max_output_tokens": 64, "extra_body": {"top_k": 3}}
        async with (
            build_worker(client, plugin, task_queue=task_queue),
            serving(api) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            refused_put = await http.put(
                "/agents/adder",
                json={**definition, "model_settings": {"tool_choice": {"tool": "subtract"}}},
                headers=writer,
            )
            put = await http.put("/agents/adder", json=definition, headers=writer)
            out_of_range = await http.post(
                "/runs", json={"agent": "adder", "model_settings": {"top_p": 7}}, headers=writer
            )
            misspelt = await http.post(
                "/runs", json={"agent": "adder", "model_settings": {"temprature": 1}}, headers=writer
            )
            dispatched = await http.post(
                "/runs", json={"agent": "adder", "model_settings": own}, headers=writer
            )
            run = await runs.wait(dispatched.json()["run_id"])

    assert refused_put.status_code == 422
    [issue] = refused_put.json()["error"]["issues"]
    assert issue["path"] == ["body", "model_settings", "tool_choice"] and "'subtract'" in issue["message"]
    assert put.status_code == 201
    assert out_of_range.status_code == 422 and "top_p is 7" in out_of_range.json()["error"]["message"]
    assert misspelt.status_code == 422
    assert run.status == RunStatus.COMPLETED, run.error
    first, second = (r.body for r in vllm.requests)
    assert (first["temperature"], first["max_tokens"], first["seed"], first["top_k"]) == (0.9, 64, 7, 3)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert (second["temperature"], second["tool_choice"]) == (0.9, "auto")
    sent = ModelSettings(
        temperature=0.9,
        max_output_tokens=64,
        seed=7,
        tool_choice=NamedTool(tool="add"),
        extra_body={"top_k": 3},
    )
    llm = [s for s in run.steps if s.kind == "llm"]
    assert [s.model_settings for s in llm] == [sent, sent.model_copy(update={"tool_choice": "auto"})]
    assert [s.model for s in llm] == ["vllm/qwen3", "vllm/qwen3"]


def claude_app(server: AnthropicServer) -> App:
    agent = define_agent(
        name="adder",
        model="anthropic/claude-test",
        instructions="Add.",
        tools=[add],
        model_settings=ModelSettings(tool_choice="required"),
        dispatch_settings=DispatchSettings(
            allow={"seed", "parallel_tool_calls", "reasoning_effort", "max_output_tokens"},
            reasoning_effort="medium",
            max_output_tokens=100,
        ),
    )
    return App(agents=[agent], models=[AnthropicProvider(api_key="k", base_url=server.url)])


async def test_a_run_s_own_settings_reach_the_messages_api_over_the_agent_s(
    chamvi: ChamviClient, running_worker
) -> None:
    with AnthropicServer() as server:
        server.add(tool_use("add", {"a": 2, "b": 3}), claude_text("5"))
        own = ModelSettings(parallel_tool_calls=False, reasoning_effort="low", max_output_tokens=99)
        async with running_worker(claude_app(server)):
            run = await chamvi.wait((await chamvi.dispatch("adder", model_settings=own)).run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    first, second = (r.body for r in server.requests)
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert (first["output_config"], first["max_tokens"]) == ({"effort": "low"}, 99)
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    [step, _] = [s for s in run.steps if s.kind == "llm"]
    assert step.model_settings == own.model_copy(update={"tool_choice": "required"})


async def test_a_run_s_settings_its_provider_refuses_fail_the_run_before_any_request(
    chamvi: ChamviClient, running_worker
) -> None:
    with AnthropicServer() as server:
        async with running_worker(claude_app(server)):
            run = await chamvi.wait((await chamvi.dispatch("adder", model_settings={"seed": 1})).run_id)

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "model_error"
    assert "the run's model_settings" in run.error.message
    assert "model 'anthropic/claude-test' does not support them: seed" in run.error.message
    assert server.requests == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"temperature": 5}, "model_settings: temperature is 5: give 0 to 2"),
        ({"tool_choice": "add"}, "name a tool with NamedTool(tool='add')"),
        ({"max_output_tokens": "lots"}, "model_settings: max_output_tokens: Input should be a valid integer"),
        ({"extra_body": {"model": "gpt-5"}}, "extra_body sets 'model', which the call itself sends"),
        ("hot", "model_settings must be a ModelSettings(...) or its data"),
    ],
)
async def test_a_dispatch_with_bad_settings_is_refused_before_the_run_starts(
    chamvi: ChamviClient, settings: Any, message: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await chamvi.dispatch("adder", model_settings=settings)
    assert message in str(refused.value)
