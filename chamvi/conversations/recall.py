"""Conversation recall: which earlier turns a turn's model sees, and as which messages.

Pure and deterministic: the ``Conversation`` workflow computes each turn's snapshot here, and the
model activity turns the stored turns it names into messages here.

What a turn recalls of an earlier turn, by default: the person's message and the agent's final
answer. Earlier tool calls stay out unless the agent's policy says ``tool_calls=True``: their results
are often long (a search's passages, an API's JSON), go stale (an order's status an hour later), and
the answer already says what the agent made of them; left in, they would crowd the recall budget out
of the conversation itself. Kept, each result is cut to ``TOOL_RESULT_RECALL_CHARS`` and only calls
whose every result is there are kept, so the provider always sees complete pairs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.models import Message
from chamvi.models.conversations import SummaryRef, TurnRecord, TurnStat
from chamvi.models.recall import RecallSnapshot, RecallSpec

DEFAULT_MAX_MESSAGES = 40
DEFAULT_MAX_TOKENS = 8000
TOOL_RESULT_RECALL_CHARS = 2000
SUMMARY_PREFIX = "Summary of the conversation before the messages below:\n"


@dataclass(frozen=True)
class RecallPolicy:
    """How much of its conversation a turn's model sees (``define_agent(conversation=...)``).

    The most recent turns are recalled whole, newest first, while they fit both bounds; what falls
    out is dropped, or folded into a stored summary when ``summarizer`` names a model. Folding
    happens when turns fall out, and folds the older half of the window at once, so the summarizer
    runs every few turns rather than at every one.

    Args:
        max_messages: the most messages recalled (a turn is its message and its answer, plus its
            tool calls and results when kept).
        max_tokens: the most tokens recalled, estimated at four characters a token (the summary
            counts too); None: no bound but ``max_messages``.
        summarizer: a ``<provider>/<model>`` ref that folds fallen-out turns into a summary; None
            drops them.
        tool_calls: recall earlier turns' tool calls and results too (see the module docstring).
    """

    max_messages: int = DEFAULT_MAX_MESSAGES
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    summarizer: str | None = None
    tool_calls: bool = False

    def spec(self) -> RecallSpec:
        """The policy as the ``Conversation`` workflow receives it."""
        return RecallSpec(
            max_messages=self.max_messages,
            max_tokens=self.max_tokens,
            summarizer=self.summarizer,
            tool_calls=self.tool_calls,
        )


def check_recall_policy(agent: str, policy: Any) -> RecallPolicy:
    """``policy`` once it is a sound ``RecallPolicy`` (None: the default one).

    Raises:
        InvalidAgentDefinitionError: naming what is wrong.
    """
    if policy is None:
        return RecallPolicy()
    if not isinstance(policy, RecallPolicy):
        raise InvalidAgentDefinitionError(f"agent {agent!r}: conversation must be a RecallPolicy(...)")
    if not isinstance(policy.max_messages, int) or policy.max_messages < 0:
        raise InvalidAgentDefinitionError(
            f"agent {agent!r}: RecallPolicy.max_messages must be an integer of 0 or more"
        )
    if policy.max_tokens is not None and (not isinstance(policy.max_tokens, int) or policy.max_tokens < 1):
        raise InvalidAgentDefinitionError(
            f"agent {agent!r}: RecallPolicy.max_tokens must be a positive integer or None"
        )
    if policy.summarizer is not None and (
        not isinstance(policy.summarizer, str) or "/" not in policy.summarizer
    ):
        raise InvalidAgentDefinitionError(
            f"agent {agent!r}: RecallPolicy.summarizer {policy.summarizer!r} must be a "
            "'<provider>/<model id>' string"
        )
    return policy


def estimate_tokens(text: str | None) -> int:
    """A provider-neutral estimate: four characters a token, and a few for the message's framing."""
    return len(text or "") // 4 + 4


def recall_window(
    turn: int, recent: Sequence[TurnStat], summary: SummaryRef | None, spec: RecallSpec
) -> RecallSnapshot:
    """The snapshot of turn ``turn``: the latest turns before it that fit the policy, after the summary.

    ``recent`` holds the stats of the turns just before ``turn``, oldest first; a turn without a stat
    is not recalled (nor any before it).
    """
    floor = summary.upto if summary is not None else 0
    tokens = summary.tokens if summary is not None else 0
    messages = 0
    first = turn
    for stat in reversed(recent):
        if stat.turn != first - 1 or stat.turn < floor:
            break
        if messages + stat.messages > spec.max_messages:
            break
        if spec.max_tokens is not None and tokens + stat.tokens > spec.max_tokens:
            break
        messages += stat.messages
        tokens += stat.tokens
        first = stat.turn
    return RecallSnapshot(first=first, upto=turn, summary=summary.upto if summary is not None else None)


def fold_range(window: RecallSnapshot) -> tuple[int, int] | None:
    """The turns a summarizer folds before ``window``'s turn; None when nothing fell out.

    Those are the fallen-out turns and the older half of the window.
    """
    floor = window.summary or 0
    if window.first <= floor:
        return None
    return floor, window.first + (window.upto - window.first) // 2


def turn_messages(record: TurnRecord, *, tool_calls: bool) -> list[Message]:
    """The messages a recall gives of one stored turn (see the module docstring)."""
    text = record.text
    if record.attachments:
        names = ", ".join(f"{a.filename or a.id} ({a.media_type})" for a in record.attachments)
        text = f"{text}\n\n[attached: {names}]"
    messages = [Message(role="user", content=text)]
    if tool_calls:
        messages.extend(record.tools)
    if record.answer is not None:
        messages.append(Message(role="assistant", content=record.answer))
    return messages


def turn_stat(record: TurnRecord, *, tool_calls: bool) -> TurnStat:
    """What the turn weighs in a recall."""
    messages = turn_messages(record, tool_calls=tool_calls)
    return TurnStat(
        turn=record.turn,
        messages=len(messages),
        tokens=sum(estimate_tokens(m.content) + _calls_tokens(m) for m in messages),
    )


def _calls_tokens(message: Message) -> int:
    return sum(estimate_tokens(json.dumps(call.arguments)) for call in message.tool_calls)


def summary_message(text: str) -> Message:
    """The stored summary as the recall gives it: a system message right after the instructions."""
    return Message(role="system", content=SUMMARY_PREFIX + text)


def answer_text(output: Any) -> str | None:
    """A run's output as the answer the conversation keeps: text as it is, structured output as JSON."""
    if output is None:
        return None
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True)


def kept_tool_messages(transcript: Sequence[Message]) -> list[Message]:
    """The tool calls and results of a run's transcript, as a recall may keep them.

    The first message (the person's) and the final answer are left out; a call whose results are
    not all there (the run failed mid-step) is dropped whole; each result is cut short.
    """
    kept: list[Message] = []
    index = 1
    while index < len(transcript):
        message = transcript[index]
        if message.role != "assistant" or not message.tool_calls:
            index += 1
            continue
        wanted = {call.id for call in message.tool_calls}
        results = []
        cursor = index + 1
        while cursor < len(transcript) and transcript[cursor].role == "tool":
            results.append(transcript[cursor])
            cursor += 1
        if {r.tool_call_id for r in results} >= wanted:
            kept.append(message.model_copy(update={"content": message.content or None}))
            for result in results:
                content = result.content or ""
                if len(content) > TOOL_RESULT_RECALL_CHARS:
                    content = content[:TOOL_RESULT_RECALL_CHARS] + " [...]"
                # text only: a result's images and files stay with the turn that made them
                kept.append(result.model_copy(update={"content": content, "parts": []}))
        index = cursor
    return kept
