"""``anthropic/...`` over real HTTP: a loopback Messages server that streams the SSE events as the API
sends them, the official SDK, a real Temporal worker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio.common import RetryPolicy

from chamvi import App, ChamviClient, RetryPolicies, RunEvent, RunStatus, RunView, define_agent, tool
from chamvi.errors import ProviderHTTPError, ProviderUnavailableError
from chamvi.models import Message, ModelSettings, NamedTool
from chamvi.providers import AnthropicProvider, ChatRequest
from tests.support.anthropic_server import AnthropicServer, error, overloaded, stream, text, tool_use

CALLED: list[tuple[int, int]] = []


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    CALLED.append((a, b))
    return a + b


class Verdict(BaseModel):
    label: str


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as started:
        yield started


def app_for(
    server: AnthropicServer,
    *,
    settings: ModelSettings | None = None,
    output: type[BaseModel] | None = None,
    quick_retries: bool = False,
) -> App:
    agent = define_agent(
        name="adder",
        model="anthropic/claude-test",
        instructions="Add the numbers.",
        tools=[add],
        model_settings=settings,
        output=output,
    )
    # the model activity's own backoff (1 s) is left alone where a test measures a retry-after
    retry = RetryPolicies(model=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=50)))
    return App(
        agents=[agent],
        models=[AnthropicProvider(api_key="test-key", base_url=server.url)],
        retry=retry if quick_retries else None,
    )


async def run_once(chamvi: ChamviClient, running_worker, app: App) -> RunView:
    async with running_worker(app):
        return await chamvi.wait((await chamvi.dispatch("adder", {"a": 2, "b": 3})).run_id)


async def test_a_tool_round_trip_streams_its_deltas_and_sends_the_tool_result_back(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(
        tool_use("add", {"a": 2, "b": 3}, call_id="toolu_abc", preamble="Adding them.", usage=(20, 9)),
        text("The sum is 5", usage=(40, 4)),
    )
    app = app_for(server)
    heard: list[RunEvent] = []
    app.on("run.delta", heard.append)

    run = await run_once(chamvi, running_worker, app)

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "The sum is 5"
    assert [s.kind for s in run.steps] == ["llm", "tool", "llm"]
    assert (run.steps[0].text, run.steps[0].tool_calls[0].arguments) == ("Adding them.", {"a": 2, "b": 3})
    assert run.steps[1].output == 5
    assert (run.usage.input_tokens, run.usage.output_tokens) == (60, 13)
    assert run.steps[0].model == "anthropic/claude-test"
    assert [(e.data["step"], e.data["text"]) for e in heard] == [
        (0, "Adding "),
        (0, "them."),
        (1, "The "),
        (1, "sum "),
        (1, "is "),
        (1, "5"),
    ]
    first, second = server.requests
    # the SDK sends the key as x-api-key (1.x) or as a bearer token (2.x)
    assert "test-key" in (first.headers.get("x-api-key"), first.headers.get("authorization", "")[7:])
    assert "anthropic-version" in first.headers
    assert first.body["model"] == "claude-test"
    assert first.body["stream"] is True
    assert first.body["max_tokens"] == 8192
    assert first.body["system"] == [{"type": "text", "text": "Add the numbers."}]
    assert [m["role"] for m in first.messages] == ["user"]
    assert first.messages[0]["content"][0]["text"].startswith("Trigger:")
    assert first.body["tools"] == [
        {"name": "add", "description": "Adds two numbers.", "input_schema": add.json_schema()}
    ]
    assert "tool_choice" not in first.body
    assert second.messages[0] == first.messages[0]
    assistant, result = second.messages[1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Adding them."},
            {"type": "tool_use", "id": "toolu_abc", "name": "add", "input": {"a": 2, "b": 3}},
        ],
    }
    assert result == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_abc", "content": [{"type": "text", "text": "5"}]}
        ],
    }


async def test_model_settings_reach_the_wire_and_the_run_s_model_steps(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    settings = ModelSettings(
        temperature=0.2,
        max_output_tokens=300,
        top_p=0.9,
        stop=["END"],
        tool_choice=NamedTool(tool="add"),
        parallel_tool_calls=False,
        reasoning_effort="low",
        extra_body={"top_k": 5},
    )
    server.add(tool_use("add", {"a": 2, "b": 3}), text("5"))

    run = await run_once(chamvi, running_worker, app_for(server, settings=settings))

    assert run.status == RunStatus.COMPLETED, run.error
    first, second = (r.body for r in server.requests)
    assert {k: first[k] for k in ("max_tokens", "temperature", "top_p", "stop_sequences", "top_k")} == {
        "max_tokens": 300,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "top_k": 5,
    }
    assert first["tool_choice"] == {"type": "tool", "name": "add", "disable_parallel_tool_use": True}
    assert first["output_config"] == {"effort": "low"}
    # after the first tool result the model may answer: the forced choice gives way to auto
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    llm = [s for s in run.steps if s.kind == "llm"]
    assert [s.model for s in llm] == ["anthropic/claude-test"] * 2
    assert llm[0].model_settings == settings
    assert llm[1].model_settings == settings.model_copy(update={"tool_choice": "auto"})


async def test_structured_output_goes_as_output_config_format_and_is_parsed(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(text(json.dumps({"label": "sum"})))

    run = await run_once(chamvi, running_worker, app_for(server, output=Verdict))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == {"label": "sum"}
    output_format = server.requests[0].body["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    assert output_format["schema"]["additionalProperties"] is False
    assert output_format["schema"]["required"] == ["label"]


@pytest.mark.parametrize("retry_after", [1, 2])
async def test_a_429_is_retried_no_sooner_than_its_retry_after(
    chamvi: ChamviClient, running_worker, server: AnthropicServer, retry_after: int
) -> None:
    server.add(
        error(
            429, "Number of requests has exceeded your rate limit", headers={"retry-after": str(retry_after)}
        )
    )
    server.add(text("5"))

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.COMPLETED, run.error
    limited, retried = server.requests
    assert retried.at - limited.at >= retry_after - 0.1
    assert retried.body == limited.body


async def test_a_529_overloaded_answer_is_retried_and_the_run_completes(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(error(529, "Overloaded"), text("5"))

    run = await run_once(chamvi, running_worker, app_for(server, quick_retries=True))

    assert run.status == RunStatus.COMPLETED, run.error
    assert len(server.requests) == 2


async def test_a_400_fails_the_run_with_model_error_after_one_request(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(error(400, "messages.0.content: Input should be a valid list"), text("never sent"))

    run = await run_once(chamvi, running_worker, app_for(server, quick_retries=True))

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "model_error"
    assert "400" in run.error.message and "Input should be a valid list" in run.error.message
    assert "'anthropic/claude-test'" in run.error.message
    assert len(server.requests) == 1


async def test_an_overloaded_error_event_before_any_output_is_retried(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(stream(overloaded()), text("5"))

    run = await run_once(chamvi, running_worker, app_for(server, quick_retries=True))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    assert len(server.requests) == 2


async def test_an_error_event_after_the_model_began_keeps_the_text_and_fails_the_run(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(stream("Hal", "f", overloaded()))

    run = await run_once(chamvi, running_worker, app_for(server, quick_retries=True))

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "provider_unavailable"
    assert "overloaded_error: Overloaded" in run.error.message
    assert [(s.kind, s.text) for s in run.steps] == [("llm", "Half")]
    assert len(server.requests) == 1


async def test_a_stream_without_a_stop_reason_fails_the_run_as_incomplete(
    chamvi: ChamviClient, running_worker, server: AnthropicServer
) -> None:
    server.add(stream("The sum of", stop_reason=None))

    run = await run_once(chamvi, running_worker, app_for(server, quick_retries=True))

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "incomplete_response"


def chat_request() -> ChatRequest:
    return ChatRequest(run_id="r", agent="adder", step=0, messages=[Message(role="user", content="2+3?")])


async def test_an_http_error_names_the_provider_and_model_and_carries_the_retry_after(
    server: AnthropicServer,
) -> None:
    server.add(error(529, "Overloaded", headers={"retry-after": "3"}))
    model = AnthropicProvider(api_key="k", base_url=server.url, name="claude-work").model("claude-test")

    with pytest.raises(ProviderUnavailableError) as raised:
        await model.complete(chat_request())

    assert (raised.value.status, raised.value.retry_after) == (529, 3.0)
    assert "'claude-work/claude-test'" in str(raised.value) and "Overloaded" in str(raised.value)
    assert len(server.requests) == 1  # the SDK's own retries are off


async def test_a_whole_answer_when_streaming_is_off(server: AnthropicServer) -> None:
    server.add(tool_use("add", {"a": 1, "b": 2}, preamble="Sure."))
    model = AnthropicProvider(api_key="k", base_url=server.url, stream=False).model("claude-test")

    response = await model.complete(chat_request())

    assert "stream" not in server.requests[0].body
    assert response.finish_reason == "tool_calls"
    assert response.message.content == "Sure."
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        ("toolu_01", "add", {"a": 1, "b": 2})
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 7)


async def test_no_key_fails_the_call_for_good_naming_the_variable(server: AnthropicServer) -> None:
    from chamvi.settings import anthropic_credentials

    if anthropic_credentials()[0] is not None:
        pytest.skip("ANTHROPIC_API_KEY is set in this environment")
    model = AnthropicProvider().model("claude-test")

    with pytest.raises(ProviderHTTPError, match="ANTHROPIC_API_KEY is not set"):
        await model.complete(chat_request())
