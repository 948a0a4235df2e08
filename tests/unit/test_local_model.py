"""The offline demo model is deterministic: each tool the payload can fill, once, then a short summary."""

import json

import pytest

from chamvi.errors import ModelNotFoundError
from chamvi.models import Message, ToolCall
from chamvi.providers import ChatRequest, LocalChatModel, ToolSchema, default_registry

TOOLS = [
    ToolSchema("lookup_order", "", {"properties": {"order_id": {"type": "string"}}}),
    ToolSchema("notify", "", {"properties": {"to": {"type": "string"}, "urgent": {"type": "boolean"}}}),
]
ENVELOPE = Message(
    role="user", content='Trigger:\n```json\n{"payload": {"order_id": "A-1", "to": "ada"}}\n```'
)


async def test_it_calls_each_tool_once_with_payload_fields_then_summarises() -> None:
    model = LocalChatModel()
    first = await model.complete(ChatRequest("r", "a", 0, [ENVELOPE], TOOLS))
    assert first.message.tool_calls[0].name == "lookup_order"
    assert first.message.tool_calls[0].arguments == {"order_id": "A-1"}
    called = Message(role="assistant", tool_calls=[ToolCall(id="1", name="lookup_order", arguments={})])
    result = Message(role="tool", tool_call_id="1", name="lookup_order", content="found")
    second = await model.complete(ChatRequest("r", "a", 1, [ENVELOPE, called, result], TOOLS))
    assert second.message.tool_calls[0].arguments == {"to": "ada", "urgent": False}
    done_call = Message(role="assistant", tool_calls=[ToolCall(id="2", name="notify", arguments={})])
    done = Message(role="tool", tool_call_id="2", name="notify", content="ok")
    last = await model.complete(ChatRequest("r", "a", 2, [ENVELOPE, called, result, done_call, done], TOOLS))
    assert last.finish_reason == "stop"
    assert last.message.content == "Done.\n- lookup_order: found\n- notify: ok"


SUPPORT_TOOLS = [
    ToolSchema("knowledge_search", "", {"properties": {"query": {"type": "string"}}, "required": ["query"]}),
    ToolSchema(
        "refund_order",
        "",
        {
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order_id", "amount"],
        },
    ),
]


def trigger(payload: dict[str, object]) -> Message:
    return Message(role="user", content=f"Trigger:\n```json\n{json.dumps({'payload': payload})}\n```")


async def test_it_calls_only_the_tools_whose_required_arguments_the_payload_has() -> None:
    model = LocalChatModel()
    envelope = trigger({"query": "shipping"})
    first = await model.complete(ChatRequest("r", "a", 0, [envelope], SUPPORT_TOOLS))
    assert [c.name for c in first.message.tool_calls] == ["knowledge_search"]
    assert first.message.tool_calls[0].arguments == {"query": "shipping"}
    called = Message(role="assistant", tool_calls=first.message.tool_calls)
    result = Message(role="tool", tool_call_id="local_0", name="knowledge_search", content="[]")
    last = await model.complete(ChatRequest("r", "a", 1, [envelope, called, result], SUPPORT_TOOLS))
    assert last.finish_reason == "stop" and not last.message.tool_calls
    assert "refund_order" in (last.message.content or "")  # named as not called, never called


async def test_its_final_answer_summarises_each_tool_result_in_one_short_line() -> None:
    model = LocalChatModel()
    envelope = trigger({"query": "refunds", "order_id": "A-1", "amount": 5})
    matches = {"matches": [{"document": f"doc-{i}.md", "text": "x " * 400} for i in range(3)]}
    page = "# Refund window\n\n" + "Refunds are paid within 14 days. " * 50
    transcript = [
        envelope,
        Message(role="assistant", tool_calls=[ToolCall(id="1", name="knowledge_search", arguments={})]),
        Message(role="tool", tool_call_id="1", name="knowledge_search", content=json.dumps(matches)),
        Message(role="assistant", tool_calls=[ToolCall(id="2", name="refund_order", arguments={})]),
        Message(role="tool", tool_call_id="2", name="refund_order", content=page),
    ]
    last = await model.complete(ChatRequest("r", "a", 2, transcript, SUPPORT_TOOLS))
    lines = (last.message.content or "").splitlines()
    assert lines[0] == "Done."
    assert lines[1] == "- knowledge_search: matches: 3"
    assert lines[2].startswith("- refund_order: # Refund window") and "more line" in lines[2]
    assert len(lines) == 3 and all(len(line) <= 120 for line in lines)


def test_an_unknown_local_model_is_refused_naming_the_ones_there_are() -> None:
    with pytest.raises(ModelNotFoundError) as refused:
        default_registry().resolve("local/demoo")
    assert refused.value.code == "model_not_found"
    assert refused.value.message == "unknown local model 'local/demoo': the local provider has 'local/demo'"
    assert isinstance(default_registry().resolve("local/demo"), LocalChatModel)
