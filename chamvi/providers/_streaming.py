"""A streamed chat completion, put together chunk by chunk, with the seed's rules for a broken stream.

Text and reasoning go to the request's ``on_delta`` as they arrive. Tool call fragments are joined
by their index. The last chunk carries the usage (``stream_options.include_usage``). What the
stream ends with decides the step: a finish reason (the usual answer), an error after the model
began to write (finish reason ``error``: the text so far and the error, the run then fails with
it), or nothing at all (finish reason ``incomplete``: the run fails and no tool call of the step
runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from openai.types.chat import ChatCompletionChunk

from chamvi.errors import ChamviError
from chamvi.models import ErrorInfo, Message, ModelResponse, ToolCall, Usage
from chamvi.providers._base import ChatRequest, DeltaKind

FinishReason = Literal["stop", "tool_calls", "length", "other"]

# Servers that stream reasoning name the field differently (vLLM and DeepSeek: reasoning_content;
# Ollama and OpenRouter: reasoning); OpenAI's own API does not stream it.
_REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass
class _CallParts:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamedAnswer:
    """The answer of one streamed call so far.

    Args:
        request: the call; its ``on_delta`` hears the text and reasoning as they arrive.
        parse_arguments: turns a tool call's joined arguments into the object the tool receives.
        finish_reason: maps the wire's finish reason (and whether there are tool calls) to ours.
    """

    def __init__(
        self,
        request: ChatRequest,
        parse_arguments: Callable[[str | None], dict[str, Any]],
        finish_reason: Callable[[str | None, bool], FinishReason],
    ) -> None:
        self._request = request
        self._parse_arguments = parse_arguments
        self._finish_reason = finish_reason
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._wire_finish: str | None = None
        self._finished = False
        self.usage = Usage()
        self.model: str | None = None
        self.id: str | None = None
        self.started = False
        """Whether the model has written anything yet: a failure before it is retried, after it not."""

    def _delta(self, kind: DeltaKind, text: str) -> None:
        self.started = True
        if self._request.on_delta is not None:
            self._request.on_delta(kind, text)

    def add(self, chunk: ChatCompletionChunk) -> None:
        """Takes one chunk of the stream."""
        self.model = getattr(chunk, "model", None) or self.model
        self.id = getattr(chunk, "id", None) or self.id
        if chunk.usage is not None:
            self.usage = Usage(
                input_tokens=chunk.usage.prompt_tokens or 0, output_tokens=chunk.usage.completion_tokens or 0
            )
        for choice in chunk.choices[:1]:
            delta = choice.delta
            extra = delta.model_extra or {}
            for name in _REASONING_FIELDS:
                reasoning = extra.get(name)
                if isinstance(reasoning, str) and reasoning:
                    self._delta("reasoning", reasoning)
                    break
            if delta.content:
                self._text.append(delta.content)
                self._delta("text", delta.content)
            if delta.refusal:
                self._refusal.append(delta.refusal)
                self.started = True
            for fragment in delta.tool_calls or ():
                self.started = True
                parts = self._calls.setdefault(fragment.index, _CallParts())
                parts.id = fragment.id or parts.id
                if fragment.function is not None:
                    parts.name += fragment.function.name or ""
                    if fragment.function.arguments:
                        parts.arguments.append(fragment.function.arguments)
            if choice.finish_reason is not None:
                self._wire_finish = choice.finish_reason
                self._finished = True

    def response(self, error: ChamviError | None = None) -> ModelResponse:
        """The step's response: finished, broken by ``error``, or incomplete."""
        return self._response(error).model_copy(update={"response_model": self.model, "response_id": self.id})

    def _response(self, error: ChamviError | None) -> ModelResponse:
        calls = [
            ToolCall(
                id=parts.id or f"call_{self._request.step}_{index}",
                name=parts.name,
                arguments=self._parse_arguments("".join(parts.arguments)),
            )
            for index, parts in sorted(self._calls.items())
            if parts.name
        ]
        content = "".join(self._text) or None
        if content is None and not calls and self._refusal:
            content = "".join(self._refusal)
        message = Message(role="assistant", content=content, tool_calls=calls)
        if error is not None:
            return ModelResponse(
                message=message,
                usage=self.usage,
                finish_reason="error",
                error=ErrorInfo(code=error.code, message=error.message),
            )
        if not self._finished:
            return ModelResponse(message=message, usage=self.usage, finish_reason="incomplete")
        finish = self._finish_reason(self._wire_finish, bool(calls))
        return ModelResponse(message=message, usage=self.usage, finish_reason=finish)
