"""Channel events routed into conversations: one conversation per thread, replies back through the channel."""

from __future__ import annotations

import uuid

from temporalio.client import Client

from chamvi import App, ChamviClient, ChannelMessage, ChannelSubscription, define_agent
from chamvi._inbound import InboundContext
from chamvi.artifacts import ArtifactStore
from chamvi.providers import ModelRegistry, ScriptedModel
from chamvi.runtime import build_worker
from tests.apps.chat import answer
from tests.polling import eventually


class Threads:
    """A chat service's channel: what the agent sends lands in ``sent``."""

    name = "threads"
    default_address = None
    untrusted = False

    def __init__(self) -> None:
        self.sent: list[ChannelMessage] = []

    async def out(self, message: ChannelMessage) -> None:
        self.sent.append(message)


def _app(threads: Threads, events: list[str] | None = None) -> App:
    models = ModelRegistry()
    models.register("scripted/desk", ScriptedModel([answer], repeat_last=True))
    subscription = ChannelSubscription(
        "threads", id="chat", events=events, conversation=lambda event: event.address
    )
    desk = define_agent(
        name="desk", model="scripted/desk", instructions="Help in the thread.", channels=[subscription]
    )
    return App(agents=[desk], models=models, channels=[threads])


async def test_each_thread_is_one_conversation_and_its_answers_go_back_to_the_thread(
    client: Client, task_queue: str
) -> None:
    store = ArtifactStore.memory()
    threads = Threads()
    app = _app(threads)
    chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
    inbound = InboundContext("threads", app.agents, chamvi)
    thread, other = f"t-{uuid.uuid4().hex[:6]}", f"t-{uuid.uuid4().hex[:6]}"
    async with build_worker(client, app, task_queue=task_queue, artifacts=store):
        first = await inbound.dispatch({"text": "Is my order late?"}, key="ev-1", address=thread)
        await eventually(lambda: _replies(threads, 1), "the first reply")
        again = await inbound.dispatch({"text": "Is my order late?"}, key="ev-1", address=thread)
        await inbound.dispatch({"text": "elsewhere"}, key="ev-2", address=other)
        await inbound.dispatch({"text": "and now?"}, key="ev-3", address=thread)
        await eventually(lambda: _replies(threads, 3), "three replies")
        page = await chamvi.conversations.messages("desk", f"threads:{thread}")

    assert first[0].conversation == f"threads:{thread}" and first[0].created
    assert again[0].run_id == first[0].run_id and not again[0].created  # a redelivery is the same turn
    by_address: dict[str, list[str]] = {m.address: [] for m in threads.sent}
    for message in threads.sent:
        by_address[message.address].append(message.body)
    assert by_address[thread] == [
        "re: Is my order late? | earlier: []",
        "re: and now? | earlier: ['Is my order late?']",
    ]
    assert by_address[other] == ["re: elsewhere | earlier: []"]
    assert threads.sent[0].key == f"{first[0].run_id}:reply"
    assert [m.invoker.kind for m in page.messages if m.role == "user" and m.invoker] == ["channel", "channel"]


async def test_only_the_subscribed_event_types_become_messages_of_the_threads_conversation(
    client: Client, task_queue: str
) -> None:
    threads = Threads()
    app = _app(threads, events=["message"])
    chamvi = ChamviClient(client, task_queue=task_queue, artifacts=ArtifactStore.memory())
    inbound = InboundContext("threads", app.agents, chamvi)
    thread = f"t-{uuid.uuid4().hex[:6]}"
    async with build_worker(client, app, task_queue=task_queue, artifacts=chamvi.artifacts):
        ignored = await inbound.dispatch({"text": ":+1:"}, key="ev-1", address=thread, event="reaction_added")
        routed = await inbound.dispatch(
            {"text": "Is my order late?"}, key="ev-2", address=thread, event="message"
        )
        await eventually(lambda: _replies(threads, 1), "the reply")

    assert ignored == []
    assert [(r.conversation, r.created) for r in routed] == [(f"threads:{thread}", True)]
    assert [m.body for m in threads.sent] == ["re: Is my order late? | earlier: []"]


async def _replies(threads: Threads, count: int) -> bool | None:
    return True if len(threads.sent) >= count else None
