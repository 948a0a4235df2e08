"""Pure conversions of the ``anthropic/...`` provider: transcript to Messages blocks, stream events back."""

from __future__ import annotations

import base64

from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

from chamvi.models import Artifact, FilePart, ImagePart, Message, TextPart, ToolCall
from chamvi.providers import AttachedFile, ChatRequest
from chamvi.providers._anthropic_wire import to_anthropic
from chamvi.providers.anthropic import AnthropicAnswer

PNG = b"\x89PNG-bytes"


def request(*messages: Message, **fields: object) -> ChatRequest:
    return ChatRequest(run_id="r", agent="a", step=2, messages=list(messages), **fields)  # type: ignore[arg-type]


def test_leading_system_messages_are_the_system_blocks_and_a_later_one_a_user_text() -> None:
    system, messages = to_anthropic(
        request(
            Message(role="system", content="Be brief."),
            Message(role="system", content="Answer in French."),
            Message(role="user", content="Hi"),
            Message(role="system", content="Now in English."),
        )
    )
    assert system == [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Answer in French."}]
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Now in English."}],
        }
    ]


def test_images_pdfs_and_text_files_become_their_blocks_and_other_media_a_note() -> None:
    pdf = Artifact(
        id="a1", run_id="r", media_type="application/pdf", size=4, sha256="0" * 64, filename="terms.pdf"
    )
    user = Message(
        role="user",
        parts=[
            TextPart(text="Look:"),
            ImagePart(
                media_type="image/png",
                data=PNG,
                provider_options={"anthropic": {"cache_control": {"type": "ephemeral"}}},
            ),
            ImagePart(media_type="image/jpeg", url="https://example.com/cat.jpg"),
            FilePart(media_type="application/pdf", artifact=pdf),
            FilePart(media_type="text/csv", data=b"a,b\n1,2", filename="t.csv"),
            FilePart(media_type="audio/wav", data=b"RIFF", filename="hello.wav"),
        ],
    )

    _, messages = to_anthropic(request(user, files={"a1": b"%PDF"}))

    blocks = messages[0]["content"]
    assert blocks[0] == {"type": "text", "text": "Look:"}
    assert blocks[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
        "cache_control": {"type": "ephemeral"},
    }
    assert blocks[2] == {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}
    assert blocks[3] == {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(b"%PDF").decode(),
        },
        "title": "terms.pdf",
    }
    assert blocks[4] == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "a,b\n1,2"},
        "title": "t.csv",
    }
    assert blocks[5]["type"] == "text" and "hello.wav (audio/wav): not sent" in blocks[5]["text"]


def test_tool_calls_and_their_results_round_trip_with_thinking_blocks_kept() -> None:
    thinking = [{"type": "thinking", "thinking": "2 and 3", "signature": "sig"}]
    assistant = Message(
        role="assistant",
        content="Adding.",
        tool_calls=[
            ToolCall(id="toolu_1", name="add", arguments={"a": 2}),
            ToolCall(id="toolu_2", name="chart"),
        ],
        provider_options={"anthropic": {"thinking": thinking}},
    )
    chart = ImagePart(media_type="image/png", data=PNG)
    _, messages = to_anthropic(
        request(
            Message(role="user", content="Add"),
            assistant,
            Message(role="tool", tool_call_id="toolu_1", name="add", content="5"),
            Message(
                role="tool",
                tool_call_id="toolu_2",
                name="chart",
                content="nope",
                is_error=True,
                parts=[chart],
            ),
        )
    )
    assert messages[1] == {
        "role": "assistant",
        "content": [
            *thinking,
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}},
            {"type": "tool_use", "id": "toolu_2", "name": "chart", "input": {}},
        ],
    }
    results = messages[2]
    assert results["role"] == "user" and len(messages) == 3
    assert results["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "5"}],
    }
    second = results["content"][1]
    assert second["is_error"] is True and second["tool_use_id"] == "toolu_2"
    assert [b["type"] for b in second["content"]] == ["text", "image"]


def test_the_run_s_attachments_follow_its_trigger_message() -> None:
    invoice = Artifact(
        id="a9", run_id="r", media_type="image/webp", size=3, sha256="0" * 64, filename="i.webp"
    )
    _, messages = to_anthropic(
        request(
            Message(role="system", content="x"),
            Message(role="user", content="Instructions example"),
            Message(role="assistant", content="Ok"),
            Message(role="user", content="Trigger"),
            transcript_start=3,
            attachments=[AttachedFile(invoice, b"RIFF")],
        )
    )
    assert [b["type"] for b in messages[2]["content"]] == ["text", "image"]
    assert messages[0]["content"] == [{"type": "text", "text": "Instructions example"}]


EVENTS = TypeAdapter(RawMessageStreamEvent)


def events(*raw: dict) -> list:
    return [EVENTS.validate_python(e) for e in raw]


def test_a_stream_with_thinking_text_and_a_tool_call_becomes_one_response_and_its_deltas() -> None:
    heard: list[tuple[str, str]] = []
    answer = AnthropicAnswer(request(on_delta=lambda kind, text: heard.append((kind, text))))
    message: dict[str, object] = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "cache_read_input_tokens": 70, "output_tokens": 1},
    }
    for event in events(
        {"type": "message_start", "message": message},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Sum it."},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQ"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "On it"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "add", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 2, '},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '"b": 3}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42},
        },
        {"type": "message_stop"},
    ):
        answer.add(event)

    response = answer.response()
    assert heard == [("reasoning", "Sum it."), ("text", "On it")]
    assert response.finish_reason == "tool_calls"
    assert response.message.content == "On it"
    assert [(c.id, c.arguments) for c in response.message.tool_calls] == [("toolu_9", {"a": 2, "b": 3})]
    assert response.message.provider_options == {
        "anthropic": {"thinking": [{"type": "thinking", "thinking": "Sum it.", "signature": "EqQ"}]}
    }
    assert (response.usage.input_tokens, response.usage.output_tokens) == (100, 42)


def test_stop_reasons_map_to_finish_reasons() -> None:
    def finish(stop_reason: str | None) -> str:
        answer = AnthropicAnswer(request())
        answer.stop_reason = stop_reason
        return answer.response().finish_reason

    assert [finish(r) for r in ("end_turn", "stop_sequence", "max_tokens", "refusal", None)] == [
        "stop",
        "stop",
        "length",
        "other",
        "incomplete",
    ]
