"""Conversations: agents that talk with people across many turns, durably.

One ``Conversation`` workflow per conversation (``workflows/conversation.py``) takes the messages and
runs the turns; the transcript lives in the conversation store (``store``); what a turn recalls is
bounded by the agent's :class:`RecallPolicy` (``chamvi.conversations.recall``).
"""

from chamvi.conversations.recall import RecallPolicy
from chamvi.conversations.store import ConversationStore, recalled_messages

__all__ = ["ConversationStore", "RecallPolicy", "recalled_messages"]
