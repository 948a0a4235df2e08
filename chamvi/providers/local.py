"""``local/...``: a deterministic offline chat model for demos. No weights, no network.

It does not understand language. It calls each of the agent's tools once, one per step, with
arguments taken from the trigger payload's fields of the same names (else the schema's default,
else an empty value of the field's type), then answers with a summary of what the tools returned.
With structured output it answers a JSON object built the same way. Use a real model
(``openai/...``) for real work; use this one to try the engine on a laptop with no key.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chamvi.models import Message, ModelResponse, ToolCall, Usage
from chamvi.providers._base import ChatRequest

_ENVELOPE = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
_EMPTY: dict[str, Any] = {
    "string": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "object": {},
}


def _payload(messages: list[Message]) -> dict[str, Any]:
    for message in messages:
        if message.role == "user" and message.content:
            match = _ENVELOPE.search(message.content)
            if match:
                try:
                    envelope = json.loads(match.group(1))
                except json.JSONDecodeError:
                    return {}
                payload = envelope.get("payload") if isinstance(envelope, dict) else None
                return payload if isinstance(payload, dict) else {}
    return {}


def _arguments(schema: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if name in payload:
            arguments[name] = payload[name]
        elif "default" in prop:
            arguments[name] = prop["default"]
        else:
            arguments[name] = _EMPTY.get(prop.get("type", "string"), "")
    return arguments


def _tokens(messages: list[Message]) -> int:
    return sum(len((m.content or "").split()) for m in messages)


class LocalChatModel:
    """The ``local/<id>`` chat model: a scripted stand-in (see the module docstring) to try chamvi offline."""

    def __init__(self, model_id: str = "demo") -> None:
        self.model_id = model_id

    async def complete(self, request: ChatRequest) -> ModelResponse:
        """Calls the next tool not yet called, then answers a summary of tool results (or a JSON object)."""
        payload = _payload(request.messages)
        called = {c.name for m in request.messages for c in m.tool_calls}
        usage = Usage(input_tokens=_tokens(request.messages), output_tokens=0)
        for tool in request.tools:
            if tool.name not in called:
                call = ToolCall(
                    id=f"local_{request.step}", name=tool.name, arguments=_arguments(tool.parameters, payload)
                )
                return ModelResponse(
                    message=Message(role="assistant", tool_calls=[call]),
                    usage=usage,
                    finish_reason="tool_calls",
                )
        if request.output_schema is not None:
            text = json.dumps(_arguments(request.output_schema, payload))
        else:
            results = [
                f"- {m.name}: {'error: ' if m.is_error else ''}{m.content}"
                for m in request.messages
                if m.role == "tool"
            ]
            text = "\n".join(["Done.", *results]) if results else "Done."
        usage = usage.model_copy(update={"output_tokens": len(text.split())})
        return ModelResponse(
            message=Message(role="assistant", content=text), usage=usage, finish_reason="stop"
        )
