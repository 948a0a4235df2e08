"""Messages in the GenAI semantic conventions' JSON form, for spans that capture content.

``gen_ai.input.messages`` and ``gen_ai.output.messages`` hold a JSON array of chat messages, each a
role and a list of typed parts (the conventions' ``gen-ai-input-messages.json`` and
``gen-ai-output-messages.json`` schemas): ``text`` with its ``content``, ``tool_call`` (``id``, ``name``,
``arguments``), ``tool_call_response`` (``id``, ``response``), and for images and files ``file`` (an
artifact, by its id), ``uri`` or ``blob`` (inline bytes, base64), each with its ``mime_type`` and
``modality``. Only ever written when content capture is on (``chamvi.telemetry._otel``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from chamvi.models import FilePart, ImagePart, Message, TextPart


def _modality(part: ImagePart | FilePart) -> str:
    kind = (part.media_type or "").partition("/")[0]
    if isinstance(part, ImagePart) or kind == "image":
        return "image"
    return kind if kind in ("audio", "video") else "file"


def _media(part: ImagePart | FilePart) -> dict[str, Any]:
    common = {"mime_type": part.media_type, "modality": _modality(part)}
    if part.artifact is not None:
        return {"type": "file", **common, "file_id": part.artifact.id}
    if part.url is not None:
        return {"type": "uri", **common, "uri": part.url}
    return {"type": "blob", **common, "content": base64.b64encode(part.data or b"").decode()}


def _parts(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        response = {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        return [response, *(_media(p) for p in message.media)]
    parts: list[dict[str, Any]] = []
    for part in message.content_parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": part.text})
        else:
            parts.append(_media(part))
    parts.extend(
        {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        for call in message.tool_calls
    )
    return parts


def chat_message(message: Message) -> dict[str, Any]:
    """One message as the conventions' ``ChatMessage``: its role, its parts, and its name if any."""
    found: dict[str, Any] = {"role": message.role, "parts": _parts(message)}
    if message.name is not None and message.role != "tool":
        found["name"] = message.name
    return found


def input_messages(messages: list[Message]) -> str:
    """``gen_ai.input.messages``: the messages sent to the model, as a JSON array."""
    return json.dumps([chat_message(m) for m in messages], default=str)


def output_messages(message: Message, finish_reason: str) -> str:
    """``gen_ai.output.messages``: the model's answer as one ``OutputMessage`` with its finish reason."""
    return json.dumps([{**chat_message(message), "finish_reason": finish_reason}], default=str)
