"""Named OpenAI-compatible providers over real HTTP: two endpoints, two agents of one app, and model
settings on the wire, on a real Temporal worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from chamvi import App, ChamviClient, RunStatus, ToolContext, define_agent, extract, tool
from chamvi.models import ModelSettings, NamedTool
from chamvi.providers import openai_compatible
from tests.support.openai_server import OpenAIServer, error, text, tool_call


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


class Amount(BaseModel):
    value: int


@tool
async def read_amount(note: str, ctx: ToolContext) -> int:
    """Reads the amount of a note."""
    found = await extract(
        ctx, schema=Amount, content=note, model_settings=ModelSettings(temperature=0, max_output_tokens=50)
    )
    return found.value


@pytest.fixture
def ollama() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


@pytest.fixture
def vllm() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


async def test_two_agents_reach_their_own_endpoints_with_their_own_keys(
    chamvi: ChamviClient, running_worker, ollama: OpenAIServer, vllm: OpenAIServer
) -> None:
    ollama.add(text("from ollama"))
    vllm.add(tool_call("add", {"a": 2, "b": 3}), text("from vllm"))
    app = App(
        agents=[
            define_agent(name="local-agent", model="ollama/llama3.2", instructions="Be local."),
            define_agent(name="gpu-agent", model="vllm/qwen3", instructions="Add.", tools=[add]),
        ],
        models=[
            openai_compatible("ollama", base_url=ollama.url + "/v1", api_key="ollama-key"),
            openai_compatible("vllm", base_url=vllm.url + "/v1", api_key="vllm-key"),
        ],
    )

    async with running_worker(app):
        local = await chamvi.wait((await chamvi.dispatch("local-agent")).run_id)
        gpu = await chamvi.wait((await chamvi.dispatch("gpu-agent")).run_id)

    assert (local.status, local.output) == (RunStatus.COMPLETED, "from ollama")
    assert (gpu.status, gpu.output) == (RunStatus.COMPLETED, "from vllm")
    assert [r.headers["authorization"] for r in ollama.requests] == ["Bearer ollama-key"]
    assert [r.headers["authorization"] for r in vllm.requests] == ["Bearer vllm-key"] * 2
    assert [r.body["model"] for r in ollama.requests + vllm.requests] == ["llama3.2", "qwen3", "qwen3"]
    assert ollama.requests[0].messages[0] == {"role": "system", "content": "Be local."}
    assert [s.model for s in local.steps] == ["ollama/llama3.2"]
    assert [s.model for s in gpu.steps if s.kind == "llm"] == ["vllm/qwen3", "vllm/qwen3"]


async def test_an_endpoint_s_error_names_its_provider_model_and_where_its_url_comes_from(
    chamvi: ChamviClient, running_worker, ollama: OpenAIServer
) -> None:
    ollama.add(error(404, "model 'llama9' not found"))
    app = App(
        agents=[define_agent(name="a", model="ollama/llama9", instructions="x")],
        models=[openai_compatible("ollama", base_url=ollama.url + "/v1")],
    )

    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("a")).run_id)

    assert run.status == RunStatus.FAILED and run.error is not None
    assert "'ollama/llama9'" in run.error.message
    assert "check the model id and the base_url of provider 'ollama'" in run.error.message
    assert ollama.requests[0].headers["authorization"] == "Bearer no-key"  # never the OpenAI key


async def test_model_settings_reach_the_chat_completions_body_and_the_run_s_model_steps(
    chamvi: ChamviClient, running_worker, ollama: OpenAIServer
) -> None:
    settings = ModelSettings(
        temperature=0.1,
        max_output_tokens=200,
        top_p=0.5,
        stop=["END"],
        seed=42,
        tool_choice=NamedTool(tool="add"),
        parallel_tool_calls=False,
        reasoning_effort="high",
        extra_body={"top_k": 20},
    )
    ollama.add(tool_call("add", {"a": 2, "b": 3}), text("5"))
    app = App(
        agents=[
            define_agent(
                name="a", model="ollama/qwen3", instructions="Add.", tools=[add], model_settings=settings
            )
        ],
        models=[openai_compatible("ollama", base_url=ollama.url + "/v1")],
    )

    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("a")).run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    first, second = (r.body for r in ollama.requests)
    sent = {
        k: first[k]
        for k in ("temperature", "max_tokens", "top_p", "stop", "seed", "reasoning_effort", "top_k")
    }
    assert sent == {
        "temperature": 0.1,
        "max_tokens": 200,
        "top_p": 0.5,
        "stop": ["END"],
        "seed": 42,
        "reasoning_effort": "high",
        "top_k": 20,
    }
    assert first["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert first["parallel_tool_calls"] is False
    assert (second["tool_choice"], second["parallel_tool_calls"]) == ("auto", False)
    llm = [s for s in run.steps if s.kind == "llm"]
    assert [s.model_settings for s in llm] == [settings, settings.model_copy(update={"tool_choice": "auto"})]


async def test_an_extraction_s_own_settings_reach_the_wire_without_tool_settings(
    chamvi: ChamviClient, running_worker, ollama: OpenAIServer
) -> None:
    ollama.add(tool_call("read_amount", {"note": "forty-two euros"}), text('{"value": 42}'), text("42"))
    agent = define_agent(
        name="a",
        model="ollama/qwen3",
        instructions="Read.",
        tools=[read_amount],
        model_settings=ModelSettings(temperature=0.7, seed=1, tool_choice="required"),
    )
    app = App(agents=[agent], models=[openai_compatible("ollama", base_url=ollama.url + "/v1")])

    async with running_worker(app):
        run = await chamvi.wait((await chamvi.dispatch("a")).run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    extraction = ollama.requests[1].body
    assert "response_format" in extraction
    assert (extraction["temperature"], extraction["max_tokens"], extraction["seed"]) == (0, 50, 1)
    assert "tool_choice" not in extraction and "tools" not in extraction
