"""Where a conversation's transcript lives: small JSON objects in the artifact store.

The artifact store is already shared by every worker, the API and the CLI, on the embedded folder
and on S3 alike, so transcripts need no store of their own and go wherever the deployment keeps
files. Layout, under ``conversations/<agent>/<quoted id>/``:

- ``turns/<NNNNNNNN>.json``: one :class:`~chamvi.models.conversations.TurnRecord` per turn, written
  once by the ``Conversation`` workflow's activity (the one writer) and never changed, so readers
  cache them freely;
- ``ids/<digest>.json``: the turn a message id became, for resent ids older than the workflow
  remembers;
- ``summaries/<NNNNNNNN>.json``: a summary folding every turn before that number;
- ``replies/<NNNNNNNN>.json``: a turn's answer went back through its channel;
- ``head.json``: the conversation's durable state, written last after each turn.

A turn's objects are written before its head, so a head never names a turn that is not stored.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from urllib.parse import quote, unquote

import obstore
from pydantic import BaseModel

from chamvi._constants import CONVERSATIONS_STORE_PREFIX
from chamvi.artifacts import ArtifactStore
from chamvi.conversations.recall import summary_message, turn_messages
from chamvi.errors import NotFoundError
from chamvi.models import Message
from chamvi.models.conversations import ConversationHead, TurnRecord
from chamvi.models.recall import ConversationTurn

CACHED_TURNS = 4096
"""Turn records a process keeps: they never change once written."""


class SummaryRecord(BaseModel):
    """A stored summary of the turns before ``upto``."""

    upto: int
    text: str
    model: str


def _segment(value: str) -> str:
    return quote(value, safe="-_")


def _number(value: int) -> str:
    return f"{value:08d}"


class ConversationStore:
    """The conversations of every agent, in an artifact store's object store.

    Args:
        artifacts: the artifact store the workers, the API and the CLI share.
    """

    def __init__(self, artifacts: ArtifactStore) -> None:
        self.store = artifacts.store
        self.location = artifacts.location
        self._turns: OrderedDict[tuple[str, str, int], TurnRecord] = OrderedDict()

    def _base(self, agent: str, conversation: str) -> str:
        return f"{CONVERSATIONS_STORE_PREFIX}/{_segment(agent)}/{_segment(conversation)}"

    async def _get(self, path: str) -> bytes | None:
        try:
            result = await obstore.get_async(self.store, path)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            return None

    async def _put(self, path: str, model: BaseModel) -> None:
        await obstore.put_async(self.store, path, model.model_dump_json().encode())

    async def head(self, agent: str, conversation: str) -> ConversationHead | None:
        """The conversation's stored state; None when nothing is stored."""
        body = await self._get(f"{self._base(agent, conversation)}/head.json")
        return ConversationHead.model_validate_json(body) if body is not None else None

    async def write_head(self, head: ConversationHead) -> None:
        """Stores the conversation's state, after the turn it counts."""
        await self._put(f"{self._base(head.agent, head.id)}/head.json", head)

    async def write_turn(self, agent: str, conversation: str, record: TurnRecord) -> None:
        """Stores a turn and the marker of its message id (the same call again writes the same)."""
        base = self._base(agent, conversation)
        await self._put(f"{base}/turns/{_number(record.turn)}.json", record)
        marker = json.dumps({"turn": record.turn, "run_id": record.run_id}).encode()
        await obstore.put_async(self.store, f"{base}/ids/{_id_key(record.run_id)}.json", marker)
        self._remember(agent, conversation, record)

    async def seen(self, agent: str, conversation: str, run_id: str) -> int | None:
        """The stored turn with this run id (so this message id); None when there is none."""
        body = await self._get(f"{self._base(agent, conversation)}/ids/{_id_key(run_id)}.json")
        return int(json.loads(body)["turn"]) if body is not None else None

    async def turn(self, agent: str, conversation: str, turn: int) -> TurnRecord:
        """One stored turn.

        Raises:
            NotFoundError: no such turn is stored.
        """
        cached = self._turns.get((agent, conversation, turn))
        if cached is not None:
            self._turns.move_to_end((agent, conversation, turn))
            return cached
        body = await self._get(f"{self._base(agent, conversation)}/turns/{_number(turn)}.json")
        if body is None:
            raise NotFoundError(
                f"turn {turn} of conversation {conversation!r} of agent {agent!r} is not in the "
                f"conversation store at {self.location}"
            )
        record = TurnRecord.model_validate_json(body)
        self._remember(agent, conversation, record)
        return record

    async def turns(self, agent: str, conversation: str, first: int, upto: int) -> list[TurnRecord]:
        """Turns ``first`` to ``upto`` (excluded), in order, read at once."""
        return list(await asyncio.gather(*(self.turn(agent, conversation, n) for n in range(first, upto))))

    def _remember(self, agent: str, conversation: str, record: TurnRecord) -> None:
        self._turns[(agent, conversation, record.turn)] = record
        self._turns.move_to_end((agent, conversation, record.turn))
        while len(self._turns) > CACHED_TURNS:
            self._turns.popitem(last=False)

    async def summary(self, agent: str, conversation: str, upto: int) -> SummaryRecord:
        """The stored summary of the turns before ``upto``.

        Raises:
            NotFoundError: there is none.
        """
        body = await self._get(f"{self._base(agent, conversation)}/summaries/{_number(upto)}.json")
        if body is None:
            raise NotFoundError(f"conversation {conversation!r} has no summary up to turn {upto}")
        return SummaryRecord.model_validate_json(body)

    async def write_summary(self, agent: str, conversation: str, summary: SummaryRecord) -> None:
        """Stores a summary (written once per ``upto``)."""
        await self._put(f"{self._base(agent, conversation)}/summaries/{_number(summary.upto)}.json", summary)

    async def replied(self, agent: str, conversation: str, turn: int) -> bool:
        """Whether the turn's answer went back through its channel."""
        return await self._get(f"{self._base(agent, conversation)}/replies/{_number(turn)}.json") is not None

    async def mark_replied(self, agent: str, conversation: str, turn: int) -> None:
        """Notes that the turn's answer went back through its channel."""
        await obstore.put_async(
            self.store, f"{self._base(agent, conversation)}/replies/{_number(turn)}.json", b"{}"
        )

    async def conversations(self, agent: str) -> list[str]:
        """The ids of ``agent``'s stored conversations (those with a head)."""
        prefix = f"{CONVERSATIONS_STORE_PREFIX}/{_segment(agent)}/"
        listed = await obstore.list_with_delimiter_async(self.store, prefix=prefix)
        return sorted(unquote(str(p).removeprefix(prefix).rstrip("/")) for p in listed["common_prefixes"])

    async def delete(self, agent: str, conversation: str) -> int:
        """Deletes everything stored of the conversation; answers how many objects went."""
        prefix = f"{self._base(agent, conversation)}/"
        entries = await obstore.list(self.store, prefix=prefix).collect_async()
        paths = [str(entry["path"]) for entry in entries]
        for start in range(0, len(paths), 1000):
            await obstore.delete_async(self.store, paths[start : start + 1000])
        for key in [k for k in self._turns if k[0] == agent and k[1] == conversation]:
            del self._turns[key]
        return len(paths)


def _id_key(run_id: str) -> str:
    # the run id's digest part: the run id is derived from the conversation and the message id
    return run_id.rsplit("-", 1)[-1]


async def recalled_messages(
    store: ConversationStore, agent: str, conversation: ConversationTurn, *, tool_calls: bool
) -> list[Message]:
    """What a turn's model sees of its conversation, by its snapshot: the summary, then the turns.

    The same snapshot gives the same messages on every call (turns and summaries never change), so a
    model call after an approval, a retry and a replay see what the first call saw.
    """
    snapshot = conversation.recall
    messages: list[Message] = []
    if snapshot.summary is not None and snapshot.summary > 0:
        summary = await store.summary(agent, conversation.id, snapshot.summary)
        messages.append(summary_message(summary.text))
    for record in await store.turns(agent, conversation.id, snapshot.first, snapshot.upto):
        messages.extend(turn_messages(record, tool_calls=tool_calls))
    return messages
