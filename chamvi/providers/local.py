"""``local/...``: a deterministic offline chat model for demos. No weights, no network.

It does not understand language. It calls each of the agent's tools whose required arguments the
trigger payload has (fields of the same names), once, one per step, in the agent's order; other
arguments come from the payload too, else the schema's default, else an empty value of the field's
type. A tool the payload cannot fill is never called: a refund of 0.00 on order "" asked of a person
helps nobody. It then answers with one short line per tool result, and names the tools it left
out. With structured output it answers a JSON object built the same way. Before it calls a tool that
a skill's description names (the skill catalog block, ``chamvi.skills``), it loads that skill with
``skill_load``, once. In a conversation's turn the payload is ``text``, the person's message, and
``query``, that message after the one before it (so a follow-up searches with the question it
follows), and the answer quotes the best passage a search found. Use a real model (``openai/...``)
for real work; use this one to try the engine on a laptop with no key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html import unescape
from typing import Any

from chamvi._constants import SKILL_TOOL_NAMES, TOOL_SKILL_LOAD
from chamvi.errors import ModelNotFoundError
from chamvi.models import Message, ModelResponse, ToolCall, Usage
from chamvi.providers._base import ChatRequest

SUMMARY_LIMIT = 100
"""The longest line the final answer gives one tool result."""
CHAT_QUERY_MESSAGES = 2
"""In a conversation, the people's messages (this one and the ones just before) a query is made of."""
CHAT_PASSAGE_CHARS = 300
LOCAL_CHAT_MODELS = ("demo",)
"""The ``local/<id>`` chat models there are: a typo (``local/demoo``) is refused, not run as the demo."""

_ENVELOPE = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
_SKILL = re.compile(r"<skill>\n<name>([^<]+)</name>\n<description>([^<]*)</description>")
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


def _fillable(schema: dict[str, Any], payload: dict[str, Any]) -> bool:
    return all(name in payload for name in schema.get("required", []))


def _summary(content: str, limit: int = SUMMARY_LIMIT) -> str:
    """A tool result on one line.

    A list as its length, an object as its scalar fields and list lengths, text as its first line
    and how many lines follow.
    """
    try:
        value = json.loads(content)
    except json.JSONDecodeError:
        value = content
    if isinstance(value, list):
        text = f"{len(value)} result{'' if len(value) == 1 else 's'}"
    elif isinstance(value, dict):
        text = ", ".join(
            f"{key}: {len(item) if isinstance(item, list | dict) else item}" for key, item in value.items()
        )
    else:
        lines = [line.strip() for line in str(value).splitlines() if line.strip()]
        more = len(lines) - 1
        text = (lines[0] if lines else "") + (
            f" (+{more} more line{'' if more == 1 else 's'})" if more else ""
        )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _skill_before(tool: str, request: ChatRequest, called: list[ToolCall]) -> str | None:
    """A skill whose description names ``tool`` and that the run has not loaded yet, if any."""
    if not any(t.name == TOOL_SKILL_LOAD for t in request.tools):
        return None
    loaded = {c.arguments.get("name") for c in called if c.name == TOOL_SKILL_LOAD}
    for message in request.messages[: request.transcript_start]:
        for name, description in _SKILL.findall(message.content or "") if message.role == "system" else ():
            if re.search(rf"\b{re.escape(tool)}\b", unescape(description)) and unescape(name) not in loaded:
                return unescape(name)
    return None


def _tokens(messages: list[Message]) -> int:
    return sum(len((m.content or "").split()) for m in messages)


def _chat_payload(request: ChatRequest) -> dict[str, Any] | None:
    """The payload of a conversation's turn (its first message is the person's text, no trigger block).

    ``text`` is this message and ``query`` the people's latest messages, recalled ones included, so a
    follow-up ("and how long does that take?") searches with the question it follows.
    """
    own = request.messages[request.transcript_start :]
    if not own or own[0].role != "user" or not own[0].content or _ENVELOPE.search(own[0].content):
        return None
    recalled = request.messages[: request.transcript_start]
    people = [m.content for m in recalled if m.role == "user" and m.content]
    return {"text": own[0].content, "query": " ".join([*people[-CHAT_QUERY_MESSAGES + 1 :], own[0].content])}


_COMMON = frozenset(
    {"and", "any", "are", "can", "does", "for", "from", "get", "has", "have", "our", "that", "the"}
    | {"this", "was", "were", "will", "with", "you", "your"}
)


def _words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {word.rstrip("s") for word in words if len(word) > 2 and word not in _COMMON}


def _closest_part(passage: str, query: str, said: Sequence[str] = ()) -> str:
    """The part of a passage (a section or a paragraph) sharing the most words with the query.

    A part the conversation's earlier answers (``said``) quoted already gives way to the next best.
    """
    parts: list[str] = []
    for block in re.split(r"\n\s*\n", passage):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        if parts and parts[-1].startswith("#") and "\n" not in parts[-1]:
            parts[-1] = f"{parts[-1]}\n{' '.join(lines)}"  # a heading goes with the paragraph under it
        else:
            parts.append("\n".join(lines))
    if not parts:
        return ""
    wanted = _words(query)
    flat = [" ".join(part.replace("#", "").split()) for part in parts]
    fresh = [part for part in flat if not any(part[:CHAT_PASSAGE_CHARS] in earlier for earlier in said)]
    return max(fresh or flat, key=lambda part: len(_words(part) & wanted))  # the first of equals wins


def _chat_answer(own: list[Message], query: str, said: Sequence[str]) -> str:
    """A chat turn's answer: the best passage a search found, else each tool result on one line."""
    lines: list[str] = []
    for message in own:
        if message.role != "tool":
            continue
        try:
            value = json.loads(message.content or "")
        except json.JSONDecodeError:
            value = None
        matches = value.get("matches") if isinstance(value, dict) else None
        if isinstance(matches, list) and matches and isinstance(matches[0], dict):
            best = matches[0]
            where = best.get("title") or best.get("document") or "the knowledge base"
            passage = _closest_part(str(best.get("text", "")), query, said)
            lines.append(f"From {where}: {passage[:CHAT_PASSAGE_CHARS]}")
        else:
            lines.append(f"{message.name}: {_summary(message.content or '')}")
    return "\n".join(lines) if lines else "I have no tool to answer that with: ask a real model (openai/...)."


class LocalChatModel:
    """The ``local/<id>`` chat model: a scripted stand-in (see the module docstring) to try chamvi offline."""

    def __init__(self, model_id: str = "demo") -> None:
        """Refuses an id the provider does not have, so a typo fails where the agent is defined.

        Raises:
            ModelNotFoundError: ``model_id`` is none of ``LOCAL_CHAT_MODELS``.
        """
        if model_id not in LOCAL_CHAT_MODELS:
            known = ", ".join(repr(f"local/{name}") for name in LOCAL_CHAT_MODELS)
            raise ModelNotFoundError(
                f"unknown local model {'local/' + model_id!r}: the local provider has {known}"
            )
        self.model_id = model_id

    async def complete(self, request: ChatRequest) -> ModelResponse:
        """Calls the next tool not yet called, then answers a summary of tool results (or a JSON object)."""
        chat = _chat_payload(request)
        payload = chat if chat is not None else _payload(request.messages)
        own = request.messages[request.transcript_start :]
        calls = [c for m in own for c in m.tool_calls]
        called = {c.name for c in calls}
        usage = Usage(input_tokens=_tokens(request.messages), output_tokens=0)
        for tool in request.tools:
            # in a chat, only tools the message gives an argument to: not every tool that needs none
            chat_skips = chat is not None and not tool.parameters.get("required")
            if (
                tool.name not in called
                and tool.name not in SKILL_TOOL_NAMES
                and not chat_skips
                and _fillable(tool.parameters, payload)
            ):
                skill = _skill_before(tool.name, request, calls)
                name, arguments = (
                    (TOOL_SKILL_LOAD, {"name": skill})
                    if skill is not None
                    else (tool.name, _arguments(tool.parameters, payload))
                )
                call = ToolCall(id=f"local_{request.step}", name=name, arguments=arguments)
                return ModelResponse(
                    message=Message(role="assistant", tool_calls=[call]),
                    usage=usage,
                    finish_reason="tool_calls",
                )
        if request.output_schema is not None:
            text = json.dumps(_arguments(request.output_schema, payload))
        elif chat is not None:
            recalled = request.messages[: request.transcript_start]
            said = [m.content for m in recalled if m.role == "assistant" and m.content]
            text = _chat_answer(own, str(chat["query"]), said)
        else:
            results = [
                f"- {m.name}: {'error: ' if m.is_error else ''}{_summary(m.content or '')}"
                for m in request.messages
                if m.role == "tool"
            ]
            left_out = [
                t.name for t in request.tools if t.name not in called and t.name not in SKILL_TOOL_NAMES
            ]
            if left_out:
                results.append(f"Not called (the payload lacks their required fields): {', '.join(left_out)}")
            text = "\n".join(["Done.", *results])
        usage = usage.model_copy(update={"output_tokens": len(text.split())})
        return ModelResponse(
            message=Message(role="assistant", content=text), usage=usage, finish_reason="stop"
        )
