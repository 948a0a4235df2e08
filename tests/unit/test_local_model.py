"""The offline demo model is deterministic: each tool once, arguments from the payload, then a summary."""

from chamvi.models import Message, ToolCall
from chamvi.providers import ChatRequest, LocalChatModel, ToolSchema

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
