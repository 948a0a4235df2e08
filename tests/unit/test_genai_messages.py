"""Captured content in the GenAI conventions' JSON form, and the conversation id a span may carry."""

from __future__ import annotations

import json
from types import SimpleNamespace

from chamvi.models import Artifact, FilePart, ImagePart, Message, RunInput, TextPart, ToolCall
from chamvi.telemetry._genai_messages import input_messages, output_messages
from chamvi.telemetry._workflow_spans import conversation_id


def test_captured_messages_are_the_conventions_chat_messages_of_typed_parts() -> None:
    chart = Artifact(id="r.0000", run_id="r", media_type="image/png", size=3, sha256="0" * 64)
    messages = [
        Message(role="user", parts=[TextPart(text="Look:"), ImagePart(url="https://example.com/a.png")]),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="render", arguments={"week": 3})]),
        Message(
            role="tool",
            tool_call_id="c1",
            name="render",
            parts=[TextPart(text="ok"), FilePart(artifact=chart)],
        ),
    ]

    assert json.loads(input_messages(messages)) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Look:"},
                {"type": "uri", "mime_type": None, "modality": "image", "uri": "https://example.com/a.png"},
            ],
        },
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "render", "arguments": {"week": 3}}],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "response": "ok"},
                {"type": "file", "mime_type": "image/png", "modality": "image", "file_id": "r.0000"},
            ],
        },
    ]


def test_the_captured_answer_is_one_output_message_with_its_finish_reason() -> None:
    answer = Message(role="assistant", content="Done.")
    assert json.loads(output_messages(answer, "stop")) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Done."}], "finish_reason": "stop"}
    ]


def test_only_a_turn_of_a_conversation_has_a_conversation_id() -> None:
    assert conversation_id(RunInput(agent="a")) is None  # a run by itself is no conversation
    turn = SimpleNamespace(conversation=SimpleNamespace(id="conv-7", turn=2))  # RunInput.conversation's shape
    assert conversation_id(turn) == "conv-7"
    assert conversation_id(SimpleNamespace(conversation=None)) is None
