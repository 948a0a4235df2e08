"""Conversations on the dev server: turns in order, recall, idempotent messages, approvals, taint,
continue-as-new, and forgetting a conversation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from chamvi import ChamviClient, RecallPolicy, RunStatus
from chamvi._constants import CONVERSATION_WORKFLOW, SA_AGENT, SA_CONVERSATION
from chamvi.artifacts import ArtifactStore, Attachment
from chamvi.conversations import ConversationStore
from chamvi.errors import AgentNotFoundError, InvalidInputError, NotFoundError
from chamvi.models.conversations import (
    ConversationHead,
    ConversationState,
    TurnRecord,
    conversation_workflow_id,
    turn_run_id,
)
from chamvi.runtime import build_worker
from tests.apps.chat import make_app
from tests.polling import eventually, until_status


@pytest.fixture
def store() -> ArtifactStore:
    return ArtifactStore.memory()


@pytest.fixture
def chat(client: Client, task_queue: str, store: ArtifactStore) -> ChamviClient:
    return ChamviClient(client, task_queue=task_queue, artifacts=store)


@pytest.fixture
def serve(client: Client, task_queue: str, store: ArtifactStore):
    @asynccontextmanager
    async def run(**options: object) -> AsyncIterator[None]:
        async with build_worker(client, make_app(**options), task_queue=task_queue, artifacts=store):  # type: ignore[arg-type]
            yield

    return run


def _cid() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


async def _answers(chat: ChamviClient, conversation: str) -> list[str | None]:
    page = await chat.conversations.messages("chat", conversation, limit=100)
    return [m.text for m in page.messages if m.role == "assistant"]


async def test_a_follow_up_sees_the_earlier_question_and_answer(chat: ChamviClient, serve) -> None:
    async with serve():
        first = await chat.conversations.send("chat", "Can I get a refund?")
        assert first.created and first.turn == 0
        assert (await chat.conversations.wait_turn(first)).status == RunStatus.COMPLETED
        second = await chat.conversations.send(
            "chat", "and how long does that take?", conversation=first.conversation
        )
        run = await chat.conversations.wait_turn(second)

    assert second.turn == 1
    assert run.output == "re: and how long does that take? | earlier: ['Can I get a refund?']"
    assert run.conversation is not None and run.conversation.recall.first == 0
    page = await chat.conversations.messages("chat", first.conversation)
    assert [(m.turn, m.role) for m in page.messages] == [
        (0, "user"),
        (0, "assistant"),
        (1, "user"),
        (1, "assistant"),
    ]
    assert page.messages[1].text == "re: Can I get a refund? | earlier: []"


async def test_three_messages_sent_at_once_are_answered_in_order_each_seeing_the_ones_before(
    chat: ChamviClient, serve
) -> None:
    conversation = _cid()
    async with serve():
        sent = await asyncio.gather(
            *(
                chat.conversations.send("chat", f"m{i}", conversation=conversation, message_id=f"id-{i}")
                for i in range(3)
            )
        )
        for message in sent:
            await chat.conversations.wait_turn(message)
        answers = await _answers(chat, conversation)

    assert sorted(m.turn for m in sent) == [0, 1, 2]
    # whatever order they arrived in, each answer recalls exactly the ones accepted before it
    page = await chat.conversations.messages("chat", conversation)
    users = [m.text or "" for m in page.messages if m.role == "user"]
    assert sorted(users) == ["m0", "m1", "m2"]
    assert answers == [f"re: {users[i]} | earlier: {users[:i]}" for i in range(3)]


async def test_a_resent_message_id_is_the_same_turn_and_starts_nothing(chat: ChamviClient, serve) -> None:
    conversation = _cid()
    async with serve():
        first = await chat.conversations.send("chat", "hello", conversation=conversation, message_id="m-1")
        again = await chat.conversations.send("chat", "hello", conversation=conversation, message_id="m-1")
        await chat.conversations.wait_turn(first)
        later = await chat.conversations.send("chat", "hello", conversation=conversation, message_id="m-1")
        view = await chat.conversations.get("chat", conversation)

    assert first.created and not again.created and not later.created
    assert first.run_id == again.run_id == later.run_id and again.turn == later.turn == 0
    assert view.turns == 1 and view.queue == [] and view.current is None


async def test_a_turn_waiting_for_approval_holds_the_next_messages_queued(chat: ChamviClient, serve) -> None:
    conversation = _cid()
    async with serve():
        asking = await chat.conversations.send("chat", "refund my order", conversation=conversation)
        await chat.conversations.turn_started(asking.run_id)
        await until_status(chat, asking.run_id, RunStatus.WAITING)
        queued = [await chat.conversations.send("chat", f"q{i}", conversation=conversation) for i in range(2)]
        view = await chat.conversations.get("chat", conversation)
        assert view.current is not None and view.current.run_id == asking.run_id
        assert [q.run_id for q in view.queue] == [m.run_id for m in queued]
        page = await chat.conversations.messages("chat", conversation)
        assert [(m.text, m.status) for m in page.messages] == [
            ("refund my order", "running"),
            ("q0", "queued"),
            ("q1", "queued"),
        ]
        await chat.approvals.approve(asking.run_id, approved=True)
        runs = [await chat.conversations.wait_turn(m) for m in [asking, *queued]]

    assert runs[0].output == "re: refund my order | earlier: [] | tools: ['refunded 25.00']"
    assert runs[2].output == "re: q1 | earlier: ['refund my order', 'q0']"


async def test_recall_is_bounded_by_the_policy_and_the_rest_is_dropped(chat: ChamviClient, serve) -> None:
    conversation = _cid()
    async with serve(recall=RecallPolicy(max_messages=4)):
        for i in range(4):
            sent = await chat.conversations.send("chat", f"m{i}", conversation=conversation)
            run = await chat.conversations.wait_turn(sent)

    assert run.output == "re: m3 | earlier: ['m1', 'm2']"
    assert run.conversation is not None and (run.conversation.recall.first, run.conversation.recall.upto) == (
        1,
        3,
    )


@pytest.mark.parametrize("kept", [False, True])
async def test_earlier_tool_calls_are_recalled_only_when_the_policy_keeps_them(
    chat: ChamviClient, serve, kept: bool
) -> None:
    conversation = _cid()
    async with serve(recall=RecallPolicy(tool_calls=kept)):
        asking = await chat.conversations.send("chat", "slow lookup of refunds", conversation=conversation)
        await chat.conversations.wait_turn(asking)
        later = await chat.conversations.send("chat", "and?", conversation=conversation)
        run = await chat.conversations.wait_turn(later)
        record = await ConversationStore(chat.artifacts).turn("chat", conversation, 0)  # type: ignore[arg-type]

    recalled = " | recalled tools: ['found slow lookup of refunds']" if kept else ""
    assert run.output == f"re: and? | earlier: ['slow lookup of refunds']{recalled}"
    assert [m.role for m in record.tools] == (["assistant", "tool"] if kept else [])


async def test_a_summarizer_folds_what_falls_out_of_the_recall(chat: ChamviClient, serve) -> None:
    conversation = _cid()
    policy = RecallPolicy(max_messages=4, summarizer="scripted/summarizer")
    async with serve(recall=policy):
        outputs = []
        for i in range(5):
            sent = await chat.conversations.send("chat", f"m{i}", conversation=conversation)
            outputs.append((await chat.conversations.wait_turn(sent)).output)

    # turn 3 would drop m0: the older half (m0, m1) is folded, m2 stays whole
    assert outputs[3] == "re: m3 | earlier: ['m2'] | summary: folded ['m0', 'm1']"
    assert outputs[4] == "re: m4 | earlier: ['m2', 'm3'] | summary: folded ['m0', 'm1']"


async def test_a_tainted_turn_taints_every_later_turn_of_the_conversation(chat: ChamviClient, serve) -> None:
    conversation = _cid()
    async with serve(untrusted=True):
        first = await chat.conversations.send("chat", "hi", conversation=conversation)
        await chat.conversations.wait_turn(first)
        outside = await chat.conversations.send(
            "chat", "from outside", conversation=conversation, channel="inbox"
        )
        tainted = await chat.conversations.wait_turn(outside)
        later = await chat.conversations.send("chat", "and now?", conversation=conversation)
        after = await chat.conversations.wait_turn(later)
        view = await chat.conversations.get("chat", conversation)

    assert (await chat.get_run(first.run_id)).taint is None
    assert tainted.taint is not None and tainted.taint.source == "channel:inbox"
    assert after.taint is not None and after.taint.source == f"conversation:{conversation}"
    assert view.taint == "channel:inbox"


async def test_a_conversation_continues_as_new_and_still_knows_old_message_ids(
    client: Client, chat: ChamviClient, serve, task_queue: str, store: ArtifactStore
) -> None:
    conversation = _cid()
    workflow_id = conversation_workflow_id("chat", conversation)
    await client.start_workflow(
        CONVERSATION_WORKFLOW,
        ConversationState(agent="chat", id=conversation, turns_per_run=2, remember_ids=2),
        id=workflow_id,
        task_queue=task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SA_AGENT, "chat"), SearchAttributePair(SA_CONVERSATION, conversation)]
        ),
    )
    async with serve():
        sent = []
        for i in range(5):
            sent.append(
                await chat.conversations.send(
                    "chat", f"m{i}", conversation=conversation, message_id=f"id-{i}"
                )
            )
            last = await chat.conversations.wait_turn(sent[-1])
        # id-0 fell out of the ids the workflow keeps, two continue-as-news ago: the store knows it
        again = await chat.conversations.send("chat", "m0", conversation=conversation, message_id="id-0")
        view = await chat.conversations.get("chat", conversation)

    assert last.output == "re: m4 | earlier: ['m0', 'm1', 'm2', 'm3']"
    assert not again.created and again.run_id == sent[0].run_id and again.turn == 0
    assert view.turns == 5 and view.queue == []
    runs = [e async for e in client.list_workflows(f'WorkflowId = "{workflow_id}"')]
    assert len(runs) >= 3  # continued as new after turns 2 and 4


async def test_a_conversation_started_again_over_its_store_numbers_on(
    client: Client, chat: ChamviClient, serve, store: ArtifactStore
) -> None:
    conversation = _cid()
    async with serve():
        first = await chat.conversations.send("chat", "m0", conversation=conversation)
        await chat.conversations.wait_turn(first)
        # Temporal loses the conversation (its workflow is gone), the store keeps it
        await client.get_workflow_handle(conversation_workflow_id("chat", conversation)).terminate()
        second = await chat.conversations.send("chat", "m1", conversation=conversation)
        run = await chat.conversations.wait_turn(second)

    assert second.turn == 1
    assert run.output == "re: m1 | earlier: ['m0']"


async def test_attachments_reach_the_turn_and_are_named_in_later_recalls(chat: ChamviClient, serve) -> None:
    conversation = _cid()
    async with serve():
        first = await chat.conversations.send(
            "chat", "see the file", conversation=conversation, attachments=[Attachment(b"hello", "note.txt")]
        )
        await chat.conversations.wait_turn(first)
        second = await chat.conversations.send("chat", "and?", conversation=conversation)
        run = await chat.conversations.wait_turn(second)
        artifacts = await chat.artifacts.list(first.run_id)  # type: ignore[union-attr]

    assert [a.filename for a in artifacts] == ["note.txt"]
    assert run.output == "re: and? | earlier: ['see the file\\n\\n[attached: note.txt (text/plain)]']"


async def test_an_invalid_message_is_refused_before_it_is_queued(chat: ChamviClient, serve) -> None:
    async with serve():
        with pytest.raises(AgentNotFoundError, match="unknown agent 'nosuch'"):
            await chat.conversations.send("nosuch", "hello", conversation=_cid())
        with pytest.raises(InvalidInputError, match="empty"):
            await chat.conversations.send("chat", "  ", conversation=_cid())
        with pytest.raises(InvalidInputError, match="conversation id"):
            await chat.conversations.send("chat", "x", conversation="")


async def test_a_deleted_conversation_is_forgotten(
    client: Client, chat: ChamviClient, serve, store: ArtifactStore
) -> None:
    conversation = _cid()
    async with serve():
        sent = await chat.conversations.send("chat", "remember me", conversation=conversation)
        await chat.conversations.wait_turn(sent)

        async def listed() -> bool | None:
            found = await chat.conversations.list("chat", limit=100)
            return True if conversation in [c.id for c in found] else None

        await eventually(listed, "the conversation in the listing")
        await eventually(lambda: _visible(client, sent.run_id), "the turn's run in visibility")
        deleted = await chat.conversations.delete("chat", conversation)

    assert deleted >= 2
    assert await ConversationStore(store).head("chat", conversation) is None
    with pytest.raises(NotFoundError):
        await chat.conversations.messages("chat", conversation)


async def _visible(client: Client, run_id: str) -> bool | None:
    async for _ in client.list_workflows(f'WorkflowId = "{run_id}"'):
        return True
    return None


async def test_the_temporal_ui_shows_the_conversation_with_its_turns_as_children_carrying_its_id(
    client: Client, chat: ChamviClient, serve
) -> None:
    conversation = _cid()
    async with serve():
        sent = [await chat.conversations.send("chat", f"m{i}", conversation=conversation) for i in range(2)]
        for message in sent:
            await chat.conversations.wait_turn(message)
    parent = conversation_workflow_id("chat", conversation)

    async def listed() -> dict[str, str] | None:
        found = {
            execution.id: execution.workflow_type
            async for execution in client.list_workflows(f'ChamviConversation = "{conversation}"')
        }
        return found if len(found) == 3 else None

    found = await eventually(listed, "the conversation and its two turns listed by ChamviConversation")
    turns = [await client.get_workflow_handle(m.run_id).describe() for m in sent]
    assert found == {parent: CONVERSATION_WORKFLOW, **{m.run_id: "AgentRun" for m in sent}}
    assert [t.parent_id for t in turns] == [parent, parent]
    assert [await t.static_summary() for t in turns] == [
        f"chat: turn {i} of conversation {conversation}" for i in range(2)
    ]


async def test_a_conversation_of_ten_thousand_turns_answers_within_its_policy_and_pages_back(
    client: Client, chat: ChamviClient, serve, store: ArtifactStore
) -> None:
    # 10 000 turns taken one by one would take an hour (bench/conversations.py --turns 10000): they
    # are written to the store as the conversation's activity writes them, and its workflow is gone,
    # as after a long life and Temporal's retention; the next turns must not notice the length
    conversation, turns = _cid(), 10_000
    transcripts = ConversationStore(store)
    now = datetime.now(UTC)
    for start in range(0, turns, 500):
        await asyncio.gather(
            *(
                transcripts.write_turn(
                    "chat",
                    conversation,
                    TurnRecord(
                        turn=n,
                        message_id=f"m-{n}",
                        run_id=turn_run_id("chat", conversation, f"m-{n}"),
                        text=f"m{n}",
                        received_at=now,
                        status=RunStatus.COMPLETED,
                        answer=f"a{n}",
                    ),
                )
                for n in range(start, min(start + 500, turns))
            )
        )
    await transcripts.write_head(ConversationHead(agent="chat", id=conversation, turns=turns, created_at=now))
    async with serve(recall=RecallPolicy(max_messages=6)):
        sent = [await chat.conversations.send("chat", f"q{i}", conversation=conversation) for i in range(3)]
        runs = [await chat.conversations.wait_turn(m) for m in sent]
        again = await chat.conversations.send("chat", "m5", conversation=conversation, message_id="m-5")
        latest = await chat.conversations.messages("chat", conversation, limit=2)
        older = await chat.conversations.messages("chat", conversation, limit=2, before=latest.before)
        first = await chat.conversations.messages("chat", conversation, limit=2, before=2)
    history = await client.get_workflow_handle(conversation_workflow_id("chat", conversation)).fetch_history()

    assert [m.turn for m in sent] == [10_000, 10_001, 10_002]
    assert runs[2].output == "re: q2 | earlier: ['m9999', 'q0', 'q1']"
    assert not again.created and again.turn == 5
    assert [m.text for m in latest.messages] == ["q1", runs[1].output, "q2", runs[2].output]
    assert [m.text for m in older.messages] == ["m9999", "a9999", "q0", runs[0].output]
    assert ([m.text for m in first.messages], first.before) == (["m0", "a0", "m1", "a1"], None)
    assert len(history.to_json()) < 200_000  # three turns' worth, nothing of the 10 000 before
