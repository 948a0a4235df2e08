"""Pure conversions of the ``openai/...`` provider: transcript to wire, completions back, retry-after."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest
from openai.types.chat import ChatCompletion

from chamvi.errors import ArtifactNotFoundError, ProviderHTTPError
from chamvi.models import Artifact, FilePart, ImagePart, Message, TextPart, ToolCall
from chamvi.providers import AttachedFile, ChatRequest, OpenAIProvider, ToolSchema
from chamvi.providers.openai import (
    INVALID_JSON_KEY,
    NON_OBJECT_KEY,
    from_completion,
    parse_arguments,
    parse_retry_after,
    to_response_format,
    to_wire_message,
    to_wire_messages,
    to_wire_tools,
)

REQUEST = ChatRequest(run_id="r", agent="a", step=3, messages=[])


def completion(
    message: dict, finish_reason: str | None = "stop", usage: dict | None = None
) -> ChatCompletion:
    """Built the way the SDK builds responses: without validation, as compatible servers stray."""
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
    return ChatCompletion.construct(
        id="c", object="chat.completion", created=0, model="m", choices=[choice], usage=usage
    )


# ---- transcript to wire -------------------------------------------------------------------


def test_system_and_user_messages_keep_role_and_content() -> None:
    assert to_wire_message(Message(role="system", content="Be brief.")) == {
        "role": "system",
        "content": "Be brief.",
    }
    assert to_wire_message(Message(role="user", content=None)) == {"role": "user", "content": ""}


def test_assistant_tool_calls_go_out_as_function_calls_with_json_arguments() -> None:
    message = Message(
        role="assistant", tool_calls=[ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})]
    )

    wire = to_wire_message(message)

    assert wire == {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
        ],
    }


def test_assistant_text_beside_tool_calls_is_kept() -> None:
    message = Message(role="assistant", content="Adding.", tool_calls=[ToolCall(id="c", name="add")])
    assert to_wire_message(message)["content"] == "Adding."


def test_a_final_assistant_answer_is_plain_content() -> None:
    assert to_wire_message(Message(role="assistant", content="5")) == {"role": "assistant", "content": "5"}


def test_tool_results_reference_their_call_and_drop_chamvi_only_fields() -> None:
    message = Message(
        role="tool", tool_call_id="call_1", name="add", content="validation_error: bad", is_error=True
    )
    assert to_wire_message(message) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "validation_error: bad",
    }


def test_invalid_arguments_round_trip_as_a_json_object() -> None:
    arguments = parse_arguments('{"a": 2,')
    wire = to_wire_message(
        Message(role="assistant", tool_calls=[ToolCall(id="c", name="add", arguments=arguments)])
    )
    assert json.loads(wire["tool_calls"][0]["function"]["arguments"]) == {INVALID_JSON_KEY: '{"a": 2,'}


def test_tools_are_function_tools_with_their_json_schema() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert to_wire_tools([ToolSchema("double", "Doubles a.", schema)]) == [
        {
            "type": "function",
            "function": {"name": "double", "description": "Doubles a.", "parameters": schema},
        }
    ]


def test_the_response_format_is_named_after_the_schema_title() -> None:
    schema = {"title": "Triage result!", "type": "object"}
    assert to_response_format(schema) == {
        "type": "json_schema",
        "json_schema": {"name": "Triage_result_", "schema": schema},
    }
    assert to_response_format({"type": "object"})["json_schema"]["name"] == "output"


# ---- arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"a": 1, "b": [2]}', {"a": 1, "b": [2]}),
        ("", {}),
        ("  ", {}),
        (None, {}),
        ("{}", {}),
        ('{"a": 1', {INVALID_JSON_KEY: '{"a": 1'}),
        ("not json", {INVALID_JSON_KEY: "not json"}),
        ("[1, 2]", {NON_OBJECT_KEY: [1, 2]}),
        ('"text"', {NON_OBJECT_KEY: "text"}),
    ],
)
def test_parse_arguments(raw: str | None, parsed: dict) -> None:
    assert parse_arguments(raw) == parsed


# ---- completions back ---------------------------------------------------------------------


def test_a_tool_call_completion_becomes_our_tool_calls_with_usage() -> None:
    wire_calls = [
        {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "call_b", "type": "function", "function": {"name": "add", "arguments": "oops"}},
    ]
    answer = completion(
        {"content": None, "tool_calls": wire_calls},
        "tool_calls",
        {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
    )

    response = from_completion(answer, REQUEST, "openai/m")

    assert response.finish_reason == "tool_calls"
    assert response.message.tool_calls == [
        ToolCall(id="call_a", name="add", arguments={"a": 1, "b": 2}),
        ToolCall(id="call_b", name="add", arguments={INVALID_JSON_KEY: "oops"}),
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 8)


def test_tool_calls_reported_with_finish_reason_stop_still_count_as_tool_calls() -> None:
    wire_call = {"id": "x", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    response = from_completion(completion({"tool_calls": [wire_call]}, "stop"), REQUEST, "openai/m")
    assert response.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("wire", "ours"),
    [("stop", "stop"), (None, "stop"), ("length", "length"), ("content_filter", "other")],
)
def test_finish_reasons(wire: str | None, ours: str) -> None:
    response = from_completion(completion({"content": "hi"}, wire), REQUEST, "openai/m")
    assert response.finish_reason == ours


def test_a_text_answer_without_usage_counts_zero_tokens() -> None:
    response = from_completion(completion({"content": "5"}), REQUEST, "openai/m")
    assert response.message == Message(role="assistant", content="5")
    assert response.usage.total_tokens == 0


def test_a_refusal_becomes_the_answer_text() -> None:
    response = from_completion(completion({"content": None, "refusal": "I can't help."}), REQUEST, "openai/m")
    assert response.message.content == "I can't help."


def test_a_completion_without_choices_is_a_retryable_error_naming_the_model() -> None:
    empty = ChatCompletion.construct(id="c", choices=[], created=0, model="m", object="chat.completion")
    with pytest.raises(RuntimeError, match="'openai/m' answered without choices"):
        from_completion(empty, REQUEST, "openai/m")


# ---- retry-after --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "1"}, 1.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "Fri, 01 Jan 2027 00:00:30 GMT"}, 30.0),
        ({"retry-after": "Fri, 01 Jan 2027 00:00:00 GMT"}, 0.0),
        ({"retry-after": "whenever"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str] | None, seconds: float | None) -> None:
    now = datetime(2027, 1, 1, tzinfo=UTC)
    assert parse_retry_after(headers, now=now) == seconds


# ---- configuration ------------------------------------------------------------------------


async def test_without_a_key_or_base_url_the_call_fails_for_good_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIProvider().model("gpt-test")  # resolving a ref needs no key

    with pytest.raises(ProviderHTTPError, match="OPENAI_API_KEY is not set") as raised:
        await model.complete(REQUEST)

    assert not raised.value.retryable


def test_a_base_url_without_a_key_sends_a_placeholder_key_and_never_retries_in_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")

    client = OpenAIProvider().client()

    assert str(client.base_url) == "http://127.0.0.1:11434/v1/"
    assert client.api_key
    assert client.max_retries == 0


def attached(media_type: str, data: bytes, filename: str | None = None) -> AttachedFile:
    artifact = Artifact(
        id="r.0000", run_id="r", media_type=media_type, filename=filename, size=len(data), sha256=""
    )
    return AttachedFile(artifact, data)


def test_attachments_are_parts_of_the_first_user_message_only() -> None:
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Trigger"),
        Message(role="user", content="later"),
    ]
    files = [
        attached("application/json; charset=utf-8", b'{"a": 1}', "a.json"),
        attached("application/zip", b"PK", None),
    ]

    wire = to_wire_messages(ChatRequest(run_id="r", agent="a", step=0, messages=messages, attachments=files))

    assert wire[0] == {"role": "system", "content": "Be brief."}
    assert wire[1]["content"] == [
        {"type": "text", "text": "Trigger"},
        {"type": "text", "text": 'a.json (application/json):\n{"a": 1}'},
        {"type": "file", "file": {"filename": "r.0000", "file_data": "data:application/zip;base64,UEs="}},
    ]
    assert wire[2] == {"role": "user", "content": "later"}


def test_without_attachments_the_first_message_stays_a_string() -> None:
    messages = [Message(role="user", content="Trigger")]

    assert to_wire_messages(ChatRequest(run_id="r", agent="a", step=0, messages=messages)) == [
        {"role": "user", "content": "Trigger"}
    ]


# ---- content parts ------------------------------------------------------------------------

PNG_BYTES = b"\x89PNG\r\n\x1a\n-tiny"


def artifact(index: int, media_type: str, filename: str | None = None) -> Artifact:
    return Artifact(
        id=f"r.{index:04d}", run_id="r", media_type=media_type, filename=filename, size=9, sha256=""
    )


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_a_user_message_of_parts_goes_out_as_image_file_audio_and_text_parts() -> None:
    chart, terms, voice = (
        artifact(1, "image/png", "chart.png"),
        artifact(2, "application/pdf", "terms.pdf"),
        artifact(3, "audio/wav"),
    )
    message = Message(
        role="user",
        parts=[
            TextPart(text="Look:"),
            FilePart(artifact=chart),
            ImagePart(url="https://example.com/ok.png", provider_options={"openai": {"detail": "low"}}),
            FilePart(artifact=terms),
            FilePart(artifact=voice),
            FilePart(media_type="text/csv", data=b"a,b\n1,2", filename="rows.csv"),
            FilePart(media_type="application/zip", url="https://example.com/all.zip", filename="all.zip"),
        ],
    )
    request = ChatRequest(
        run_id="r",
        agent="a",
        step=0,
        messages=[message],
        files={chart.id: PNG_BYTES, terms.id: b"%PDF", voice.id: b"RIFF"},
    )

    assert to_wire_message(message, request) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image_url", "image_url": {"url": data_url("image/png", PNG_BYTES)}},
            {"type": "image_url", "image_url": {"url": "https://example.com/ok.png", "detail": "low"}},
            {
                "type": "file",
                "file": {"filename": "terms.pdf", "file_data": data_url("application/pdf", b"%PDF")},
            },
            {
                "type": "input_audio",
                "input_audio": {"data": base64.b64encode(b"RIFF").decode(), "format": "wav"},
            },
            {"type": "text", "text": "rows.csv (text/csv):\na,b\n1,2"},
            {"type": "text", "text": "all.zip (application/zip): https://example.com/all.zip"},
        ],
    }


def test_provider_options_for_openai_reach_the_message_and_the_part_and_others_are_ignored() -> None:
    message = Message(
        role="user",
        parts=[
            TextPart(
                text="The policy.",
                provider_options={
                    "openai": {"prompt_cache_breakpoint": {"mode": "explicit"}},
                    "anthropic": {"x": 1},
                },
            )
        ],
        provider_options={"openai": {"name": "example_user"}, "anthropic": {"cache_control": {}}},
    )

    assert to_wire_message(message) == {
        "role": "user",
        "content": [{"type": "text", "text": "The policy.", "prompt_cache_breakpoint": {"mode": "explicit"}}],
        "name": "example_user",
    }


def test_an_assistant_message_of_parts_goes_out_as_its_text_parts() -> None:
    message = Message.model_validate({"role": "assistant", "content": [{"type": "text", "text": "Ready."}]})
    assert to_wire_message(message) == {"role": "assistant", "content": [{"type": "text", "text": "Ready."}]}


def test_the_files_of_tool_results_follow_the_steps_tool_messages_as_one_user_message() -> None:
    chart = artifact(1, "image/png", "chart.png")
    messages = [
        Message(role="user", content="Trigger"),
        Message(
            role="assistant", tool_calls=[ToolCall(id="c1", name="render"), ToolCall(id="c2", name="add")]
        ),
        Message(
            role="tool",
            tool_call_id="c1",
            name="render",
            parts=[TextPart(text="The chart:"), FilePart(artifact=chart)],
        ),
        Message(role="tool", tool_call_id="c2", name="add", content="3"),
        Message(role="assistant", content="Done."),
    ]

    wire = to_wire_messages(
        ChatRequest(run_id="r", agent="a", step=1, messages=messages, files={chart.id: PNG_BYTES})
    )

    assert [w["role"] for w in wire] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert wire[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "The chart:\n[chart.png (image/png): attached below]",
    }
    assert wire[4]["content"] == [
        {"type": "text", "text": "Files of the result of tool call c1:"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", PNG_BYTES)}},
    ]


def test_attachments_go_to_the_runs_first_user_message_not_to_an_instructions_one() -> None:
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="An example."),
        Message(role="assistant", content="Noted."),
        Message(role="user", content="Trigger"),
    ]
    files = [attached("image/png", PNG_BYTES, "dot.png")]

    wire = to_wire_messages(
        ChatRequest(run_id="r", agent="a", step=0, messages=messages, attachments=files, transcript_start=3)
    )

    assert wire[1] == {"role": "user", "content": "An example."}
    assert wire[3]["content"] == [
        {"type": "text", "text": "Trigger"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", PNG_BYTES)}},
    ]


def test_a_part_whose_artifact_was_not_read_for_the_call_is_artifact_not_found() -> None:
    message = Message(role="user", parts=[FilePart(artifact=artifact(7, "application/pdf"))])
    with pytest.raises(ArtifactNotFoundError, match=r"'r\.0007'"):
        to_wire_message(message, REQUEST)


def test_the_leading_system_messages_are_the_instructions_of_a_provider_that_takes_them_apart() -> None:
    messages = [
        Message(role="system", content="One."),
        Message(role="system", content="Two."),
        Message(role="user", content="Hi"),
        Message(role="system", content="Later."),
    ]
    system, rest = ChatRequest(run_id="r", agent="a", step=0, messages=messages).system_prefix()
    assert system == ["One.", "Two."]
    assert [m.content for m in rest] == ["Hi", "Later."]
