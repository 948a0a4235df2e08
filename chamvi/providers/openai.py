"""``openai/<model id>``: the OpenAI chat completions API and every server that speaks it.

``OPENAI_BASE_URL`` reaches Ollama, vLLM and other compatible servers. The SDK's own retries are
off: Temporal retries the model activity, honouring ``retry-after`` (see ``activities.model``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from chamvi.models import Message, ModelResponse, ToolCall, Usage
from chamvi.providers._base import ChatRequest, ProviderHTTPError

_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


def _wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content or ""}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in message.tool_calls
        ]
    return wire


def _parse_arguments(raw: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": raw}
    return parsed if isinstance(parsed, dict) else {"_value": parsed}


class OpenAIChatModel:
    def __init__(self, model_id: str, client: openai.AsyncOpenAI) -> None:
        self.model_id = model_id
        self.client = client

    async def complete(self, request: ChatRequest) -> ModelResponse:
        params: dict[str, Any] = {"model": self.model_id, "messages": [_wire_message(m) for m in request.messages]}
        if request.tools:
            params["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools
            ]
        if request.output_schema is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
        try:
            completion = await self.client.chat.completions.create(**params)
        except openai.APIStatusError as error:
            raise ProviderHTTPError(error.status_code, error.message, _retry_after(error.response.headers)) from None
        choice = completion.choices[0]
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=_parse_arguments(c.function.arguments))
            for c in (choice.message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        usage = Usage(
            input_tokens=completion.usage.prompt_tokens if completion.usage else 0,
            output_tokens=completion.usage.completion_tokens if completion.usage else 0,
        )
        return ModelResponse(
            message=Message(role="assistant", content=choice.message.content, tool_calls=calls),
            usage=usage,
            finish_reason=_FINISH.get(choice.finish_reason or "", "other"),  # type: ignore[arg-type]
        )


class OpenAIProvider:
    """Builds one ``AsyncOpenAI`` client, lazily, for every ``openai/...`` ref."""

    def __init__(
        self, api_key: str | None = None, base_url: str | None = None, timeout: float = 120.0
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._client: openai.AsyncOpenAI | None = None

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key or os.environ.get("OPENAI_API_KEY") or "missing-openai-api-key",
                base_url=self._base_url or os.environ.get("OPENAI_BASE_URL") or None,
                max_retries=0,
                timeout=self._timeout,
            )
        return self._client

    def model(self, model_id: str) -> OpenAIChatModel:
        return _LazyOpenAIModel(model_id, self)  # type: ignore[return-value]


class _LazyOpenAIModel:
    """Resolving a ref must not need a key (``chamvi check`` resolves every ref offline)."""

    def __init__(self, model_id: str, provider: OpenAIProvider) -> None:
        self.model_id = model_id
        self._provider = provider

    async def complete(self, request: ChatRequest) -> ModelResponse:
        return await OpenAIChatModel(self.model_id, self._provider.client()).complete(request)
