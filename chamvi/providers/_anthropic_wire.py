"""Requests in the Anthropic Messages format: system blocks, messages of content blocks, tools, settings.

- The leading system messages are the ``system`` parameter (one text block each); a later system
  message goes as a user message's text, the API having no system role among the messages.
- User content: text blocks; images (JPEG, PNG, GIF, WebP) as image blocks; PDFs as document
  blocks; text files (``text/*``, JSON, XML, YAML) as plain-text document blocks titled by their
  name; any other file as a text block naming it (the API takes no other media). By URL, an
  image or a PDF goes by URL, anything else as a text block naming the URL.
- An assistant's text and tool calls: text and ``tool_use`` blocks, after the thinking blocks the
  model sent with them (kept in the message's ``provider_options["anthropic"]["thinking"]``, which
  the API wants back in a tool round trip when thinking is on).
- Tool results: ``tool_result`` blocks of one user message, their images and files inside.
- ``"anthropic"`` provider options of a part are added to its block (``cache_control``); those of a
  message to its last block.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from chamvi.models import ContentPart, Message, ModelSettings, NamedTool, TextPart
from chamvi.models.model_settings import extra_body_of
from chamvi.providers._base import AttachedFile, ChatRequest, ToolSchema
from chamvi.providers.openai import _name  # one naming rule for a part, whichever provider sends it

PROVIDER_OPTIONS_KEY = "anthropic"
THINKING_KEY = "thinking"
"""Where an assistant message keeps the thinking blocks the model sent with it."""

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml", "application/x-yaml"})
_EFFORTS = {"low", "medium", "high", "xhigh", "max"}
_SERVICE_TIERS = ("auto", "standard_only")
TEMPERATURE_MAX = 1.0


def _data_url(url: str) -> tuple[str, bytes] | None:
    """A ``data:<type>;base64,...`` URL's media type and bytes, or None for another URL."""
    if not url.startswith("data:"):
        return None
    head, _, encoded = url[5:].partition(",")
    if not head.endswith(";base64"):
        return None
    try:
        return head.removesuffix(";base64"), base64.b64decode(encoded)
    except (binascii.Error, ValueError):
        return None


def media_block(media_type: str, name: str, data: bytes | None, url: str | None = None) -> dict[str, Any]:
    """An image or a file as a content block (see the module docstring for what becomes what)."""
    media_type = media_type.split(";")[0].strip()
    if data is None and url is not None and (inline := _data_url(url)) is not None:
        media_type, data = inline[0] or media_type, inline[1]
    if data is None:
        if media_type in IMAGE_TYPES or media_type == "image/*":
            return {"type": "image", "source": {"type": "url", "url": url or ""}}
        if media_type == "application/pdf":
            return {"type": "document", "source": {"type": "url", "url": url or ""}, "title": name}
        return {"type": "text", "text": f"{name} ({media_type}): {url}"}
    if media_type.startswith("text/") or media_type in _TEXT_TYPES:
        source = {"type": "text", "media_type": "text/plain", "data": data.decode(errors="replace")}
        return {"type": "document", "source": source, "title": name}
    encoded = base64.b64encode(data).decode()
    if media_type in IMAGE_TYPES:
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": encoded}}
    if media_type == "application/pdf":
        source = {"type": "base64", "media_type": media_type, "data": encoded}
        return {"type": "document", "source": source, "title": name}
    return {
        "type": "text",
        "text": f"{name} ({media_type}): not sent: Anthropic's Messages API takes images, PDFs and text",
    }


def content_block(part: ContentPart, request: ChatRequest) -> dict[str, Any]:
    """One content part as a block, with its ``"anthropic"`` provider options.

    Raises:
        ArtifactNotFoundError: the part references an artifact whose bytes ``request`` lacks.
    """
    if isinstance(part, TextPart):
        block: dict[str, Any] = {"type": "text", "text": part.text}
    else:
        block = media_block(part.media_type or "image/*", _name(part), request.data_of(part), part.url)
    block.update(part.provider_options.get(PROVIDER_OPTIONS_KEY, {}))
    return block


def attachment_block(attached: AttachedFile) -> dict[str, Any]:
    """One attachment of the run as a content block."""
    artifact = attached.artifact
    return media_block(artifact.media_type, artifact.filename or artifact.id, attached.data)


def _blocks(message: Message, request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """The role a message goes out in, and its blocks (empty text left out: the API refuses it)."""
    options = dict(message.provider_options.get(PROVIDER_OPTIONS_KEY, {}))
    thinking = options.pop(THINKING_KEY, None)
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        inner = [{"type": "text", "text": message.content}] if message.content else []
        inner += [content_block(p, request) for p in message.media]
        if inner:
            result["content"] = inner
        if message.is_error:
            result["is_error"] = True
        blocks = [result]
        role = "user"
    elif message.role == "assistant":
        blocks = list(thinking) if isinstance(thinking, list) else []
        texts = [p for p in message.content_parts if isinstance(p, TextPart) and p.text]
        blocks += [content_block(p, request) for p in texts]
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls
        ]
        role = "assistant"
    else:  # user, and a system message after the leading ones
        parts = [p for p in message.content_parts if not isinstance(p, TextPart) or p.text]
        blocks = [content_block(p, request) for p in parts]
        role = "user"
    if options and blocks:
        blocks[-1] = {**blocks[-1], **options}
    return role, blocks


def to_anthropic(request: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The request's ``system`` blocks and ``messages``.

    The run's first user message carries the attachments, and consecutive blocks of one role share
    a message (the tool results of one step).
    """
    system_texts, rest = request.system_prefix()
    system = [{"type": "text", "text": text} for text in system_texts if text]
    offset = len(request.messages) - len(rest)
    trigger = request.trigger_index() if request.attachments else None
    messages: list[dict[str, Any]] = []
    for index, message in enumerate(rest, start=offset):
        role, blocks = _blocks(message, request)
        if index == trigger:
            blocks += [attachment_block(a) for a in request.attachments]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    return system, messages


def to_anthropic_tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """The agent's tools as the Messages API's ``tools``."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def refused_settings(settings: ModelSettings) -> list[str]:
    """What the Messages API cannot do of ``settings``: refused when an agent is defined."""
    refused = []
    if settings.seed is not None:
        refused.append("seed: Anthropic's Messages API has no seed")
    if settings.temperature is not None and settings.temperature > TEMPERATURE_MAX:
        refused.append(f"temperature {settings.temperature:g}: Anthropic takes 0 to 1")
    if settings.service_tier is not None and settings.service_tier not in _SERVICE_TIERS:
        refused.append(
            f"service_tier {settings.service_tier!r}: Anthropic's tiers are "
            + ", ".join(repr(t) for t in _SERVICE_TIERS)
        )
    if settings.reasoning_effort is not None and settings.reasoning_effort not in _EFFORTS:
        refused.append(
            f"reasoning_effort {settings.reasoning_effort!r}: Anthropic's efforts are "
            + ", ".join(repr(e) for e in ("low", "medium", "high", "xhigh", "max"))
        )
    return refused


def _tool_choice(settings: ModelSettings) -> dict[str, Any] | None:
    choice = settings.tool_choice
    if isinstance(choice, NamedTool):
        param: dict[str, Any] = {"type": "tool", "name": choice.tool}
    elif choice is not None:
        param = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    elif settings.parallel_tool_calls is False:
        param = {"type": "auto"}
    else:
        return None
    if settings.parallel_tool_calls is False and param["type"] != "none":
        param["disable_parallel_tool_use"] = True
    return param


def settings_params(settings: ModelSettings | None, default_max_tokens: int) -> dict[str, Any]:
    """The Messages API parameters of ``settings``, ``max_tokens`` always (the API requires it).

    ``stop`` goes as ``stop_sequences``, tool choice and parallel calls as ``tool_choice``, the
    effort as ``output_config.effort``; ``temperature``, ``top_p`` and ``extra_body`` in the SDK's
    ``extra_body`` (the body fields they are).

    Raises:
        ModelError: ``extra_body`` sets a field chamvi sets or checks (``CHECKED_BODY_FIELDS``).
    """
    params: dict[str, Any] = {"max_tokens": default_max_tokens}
    if settings is None:
        return params
    if settings.max_output_tokens is not None:
        params["max_tokens"] = settings.max_output_tokens
    # the SDK's create() of 2.x names no temperature nor top_p: the body carries them all the same
    body = {
        name: getattr(settings, name)
        for name in ("temperature", "top_p")
        if getattr(settings, name) is not None
    }
    if settings.stop is not None:
        params["stop_sequences"] = list(settings.stop)
    choice = _tool_choice(settings)
    if choice is not None:
        params["tool_choice"] = choice
    if settings.reasoning_effort is not None:
        params["output_config"] = {"effort": settings.reasoning_effort}
    if settings.service_tier is not None:
        params["service_tier"] = settings.service_tier
    body = {**extra_body_of(settings), **body}
    if body:
        params["extra_body"] = body
    return params
