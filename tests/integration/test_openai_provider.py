"""The ``openai/...`` provider over real HTTP: a loopback OpenAI-compatible server, a real Temporal worker."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from chamvi import App, ChamviClient, RunStatus, RunView, define_agent, tool
from chamvi.errors import ProviderUnavailableError
from chamvi.models import Message
from chamvi.providers import ChatRequest, ModelRegistry, OpenAIProvider
from chamvi.providers.openai import INVALID_JSON_KEY
from tests.support.openai_server import OpenAIServer, error, rate_limited, text, tool_call


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


class Verdict(BaseModel):
    label: str
    confidence: float


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


def app_for(server: OpenAIServer, *, output: type[BaseModel] | None = None) -> App:
    models = ModelRegistry(
        providers={"openai": OpenAIProvider(api_key="test", base_url=server.url + "/v1").model}
    )
    agent = define_agent(
        name="adder", model="openai/test-model", instructions="Add the numbers.", tools=[add], output=output
    )
    return App(agents=[agent], models=models)


async def run_once(chamvi: ChamviClient, running_worker, app: App) -> RunView:
    async with running_worker(app):
        dispatched = await chamvi.dispatch("adder", {"a": 2, "b": 3})
        return await chamvi.wait(dispatched.run_id)


async def test_a_tool_call_then_a_final_answer_completes_the_run_with_the_tool_result_sent_back(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(
        tool_call("add", {"a": 2, "b": 3}, call_id="call_abc", usage=(10, 7)), text("5", usage=(12, 3))
    )

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    assert [s.kind for s in run.steps] == ["llm", "tool", "llm"]
    assert run.steps[1].output == 5
    assert (run.usage.input_tokens, run.usage.output_tokens) == (22, 10)
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer test"
    assert first.body["model"] == "test-model"
    assert first.messages[0] == {"role": "system", "content": "Add the numbers."}
    assert first.messages[1]["role"] == "user"
    assert [t["function"]["name"] for t in first.body["tools"]] == ["add"]
    assert first.body["tools"][0]["function"]["parameters"]["properties"].keys() == {"a", "b"}
    assert "response_format" not in first.body
    assert second.messages[:2] == first.messages
    assistant, tool_message = second.messages[2:]
    assert assistant["role"] == "assistant"
    assert [(c["id"], c["function"]["name"]) for c in assistant["tool_calls"]] == [("call_abc", "add")]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert tool_message == {"role": "tool", "tool_call_id": "call_abc", "content": "5"}


# The model activity's own backoff starts at 1 s, so only a longer retry-after tells them apart.
@pytest.mark.parametrize("retry_after", [1, 2])
async def test_a_429_is_retried_no_sooner_than_its_retry_after(
    chamvi: ChamviClient, running_worker, server: OpenAIServer, retry_after: int
) -> None:
    server.add(rate_limited(retry_after=str(retry_after)), text("5"))

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    limited, retried = server.requests
    assert retried.at - limited.at >= retry_after - 0.1
    assert retried.body == limited.body


async def test_a_500_is_retried_and_the_run_completes(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(error(500, "the server had an error"), text("5"))

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    assert len(server.requests) == 2


async def test_a_400_fails_the_run_with_model_error_after_one_request(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(error(400, "Invalid schema for function 'add'"), text("never sent"))

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.FAILED
    assert run.error is not None
    assert run.error.code == "model_error"
    assert "400" in run.error.message and "Invalid schema for function 'add'" in run.error.message
    assert len(server.requests) == 1
    assert server.pending == 1


async def test_an_answer_cut_off_at_the_token_limit_fails_the_run_as_incomplete(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(text("The sum of 2 and", finish_reason="length"))

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "incomplete_response"


async def test_structured_output_is_requested_as_a_json_schema_and_parsed(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(text(json.dumps({"label": "sum", "confidence": 0.9})))

    run = await run_once(chamvi, running_worker, app_for(server, output=Verdict))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == {"label": "sum", "confidence": 0.9}
    response_format = server.requests[0].body["response_format"]
    assert response_format == {
        "type": "json_schema",
        "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()},
    }


async def test_a_final_answer_off_the_output_schema_fails_the_run_listing_each_field(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(text(json.dumps({"label": "sum", "confidence": "very"})))

    run = await run_once(chamvi, running_worker, app_for(server, output=Verdict))

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "validation_error"
    assert run.error.message.startswith("the final answer does not match the output schema")
    assert [(i.path, i.code) for i in run.error.issues or []] == [(("confidence",), "float_parsing")]


async def test_tool_arguments_that_are_not_json_reach_the_model_as_a_tool_error(
    chamvi: ChamviClient, running_worker, server: OpenAIServer
) -> None:
    server.add(tool_call("add", '{"a": 2, "b":', call_id="call_bad"), text("I could not add them."))

    run = await run_once(chamvi, running_worker, app_for(server))

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.steps[1].error is not None and run.steps[1].error.code == "validation_error"
    assistant, tool_message = server.requests[1].messages[2:]
    # the transcript goes back as valid JSON: some compatible servers refuse arguments that do not parse
    sent = json.loads(assistant["tool_calls"][0]["function"]["arguments"])
    assert sent == {INVALID_JSON_KEY: '{"a": 2, "b":'}
    assert tool_message["tool_call_id"] == "call_bad"
    assert tool_message["content"].startswith("validation_error")


def chat_request() -> ChatRequest:
    return ChatRequest(run_id="r", agent="adder", step=0, messages=[Message(role="user", content="2+3?")])


async def test_an_http_error_carries_its_status_and_the_retry_after_ms_header(server: OpenAIServer) -> None:
    server.add(error(503, "overloaded", headers={"retry-after-ms": "1500", "retry-after": "9"}))
    model = OpenAIProvider(api_key="test", base_url=server.url + "/v1").model("test-model")

    with pytest.raises(ProviderUnavailableError) as raised:
        await model.complete(chat_request())

    assert raised.value.status == 503
    assert raised.value.retryable
    assert raised.value.retry_after == 1.5
    assert "overloaded" in str(raised.value) and "'openai/test-model'" in str(raised.value)
    assert len(server.requests) == 1  # the SDK's own retries are off


async def test_an_unreachable_server_raises_a_retryable_error_naming_its_url() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIProvider(api_key="test", base_url=f"http://127.0.0.1:{port}/v1").model("test-model")

    with pytest.raises(ProviderUnavailableError) as raised:
        await model.complete(chat_request())

    assert raised.value.status is None
    assert f"127.0.0.1:{port}" in str(raised.value)
    assert "OPENAI_BASE_URL" in str(raised.value)
