"""What a conversation's turn carries of the conversation: references, never the messages.

A turn of a conversation is an ordinary ``AgentRun``; its input names the conversation, the turn and
the recall snapshot (which stored turns its model sees, and which summary), so every model call of
the run (the first, one after an approval, a retry, a replay) reads the same earlier messages. The
messages themselves live in the conversation store (``chamvi.conversations.store``), immutable once
written.

These models sit apart from ``chamvi.models.conversations`` because ``RunInput`` needs them and the
conversation models need ``RunInput``'s neighbours.
"""

from __future__ import annotations

from pydantic import BaseModel


class RecallSpec(BaseModel):
    """An agent's recall policy as the ``Conversation`` workflow receives it (``AgentSpec.conversation``).

    See ``chamvi.conversations.RecallPolicy`` for the meaning of each field.
    """

    max_messages: int
    max_tokens: int | None = None
    summarizer: str | None = None
    tool_calls: bool = False


class RecallSnapshot(BaseModel):
    """Which earlier turns a turn recalls: ``first`` up to (not including) ``upto``, after the summary.

    ``upto`` is the turn's own index; ``summary`` is the turn up to which a stored summary folds the
    conversation (None: no summary), and ``first`` is never below it.
    """

    first: int
    upto: int
    summary: int | None = None


class ConversationTurn(BaseModel):
    """``RunInput.conversation``: the run is turn ``turn`` of conversation ``id`` of its agent."""

    id: str
    turn: int
    message_id: str
    recall: RecallSnapshot

    @property
    def recalls_anything(self) -> bool:
        """Whether the turn's model sees anything of the conversation before its own message."""
        return self.recall.first < self.recall.upto or self.recall.summary is not None
