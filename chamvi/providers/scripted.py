"""Scripted chat models for tests: prepared answers, one per step, no network.

The turn for a request is chosen by the request's step, so a retried or replayed step (even on
another worker process) gets the same answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chamvi.models import Message, ModelResponse, ToolCall, Usage
from chamvi.providers._base import ChatRequest


@dataclass(frozen=True)
class ScriptedTurn:
    """One prepared answer: text, tool calls, or both, with the usage and finish reason to report."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=10, output_tokens=5))
    finish_reason: str | None = None


def reply(text: str, *, usage: Usage | None = None, finish_reason: str | None = None) -> ScriptedTurn:
    """A final answer."""
    return ScriptedTurn(
        text=text, usage=usage or Usage(input_tokens=10, output_tokens=5), finish_reason=finish_reason
    )


def call(name: str, _id: str | None = None, /, **arguments: Any) -> ScriptedTurn:
    """A turn that calls one tool; combine calls with ``calls(...)``."""
    return ScriptedTurn(tool_calls=[ToolCall(id=_id or "", name=name, arguments=arguments)])


def calls(*turns: ScriptedTurn) -> ScriptedTurn:
    """One turn calling several tools at once."""
    return ScriptedTurn(tool_calls=[c for t in turns for c in t.tool_calls])


Turn = ScriptedTurn | Exception | Callable[[ChatRequest], ScriptedTurn | Awaitable[ScriptedTurn]]


class ScriptedModel:
    """Answers step N with ``turns[N]``; a turn may be an exception to raise or a function of the request."""

    def __init__(self, turns: Sequence[Turn], *, repeat_last: bool = False) -> None:
        self.turns = list(turns)
        self.repeat_last = repeat_last
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ModelResponse:
        """The turn for ``request.step``, recorded in ``requests`` so a test can inspect what the model saw.

        Raises:
            RuntimeError: no turn for this step (and ``repeat_last`` is off).
        """
        self.requests.append(request)
        index = request.step
        if index >= len(self.turns):
            if not self.repeat_last or not self.turns:
                raise RuntimeError(f"scripted model has no turn for step {request.step}")
            index = len(self.turns) - 1
        turn = self.turns[index]
        if isinstance(turn, Exception):
            raise turn
        if callable(turn):
            produced = turn(request)
            turn = await produced if inspect.isawaitable(produced) else produced
        tool_calls = [
            c if c.id else c.model_copy(update={"id": f"call_{request.step}_{i}"})
            for i, c in enumerate(turn.tool_calls)
        ]
        finish = turn.finish_reason or ("tool_calls" if tool_calls else "stop")
        return ModelResponse(
            message=Message(role="assistant", content=turn.text, tool_calls=tool_calls),
            usage=turn.usage,
            finish_reason=finish,  # type: ignore[arg-type]
        )
