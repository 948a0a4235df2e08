"""Channels that receive on their own: every worker starts them once it polls and stops them when it ends."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from chamvi import App, ChamviClient, ChamviPlugin, ChannelContext, RunStatus, define_agent
from chamvi._lifecycle import memory_index
from chamvi.channels import ChannelMessage, StartedRun
from chamvi.errors import BackgroundError
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from chamvi.runtime import build_worker
from tests.polling import eventually
from tests.unit.test_on_error import divide_by_zero


class InboxChannel:
    """Receives one message when it starts, as a channel polling a mailbox would; records its lifecycle."""

    untrusted = False
    default_address = None

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[str] = []
        self.started: list[list[StartedRun]] = []

    async def start(self, ctx: ChannelContext) -> None:
        self.events.append("start")
        # the mailbox's message id is the delivery key: every replica reads the same message
        self.started.append(await ctx.dispatch({"subject": "hello"}, key="message-1", address="alice"))

    async def stop(self) -> None:
        self.events.append("stop")

    async def out(self, message: ChannelMessage) -> None:
        self.events.append(f"out:{message.address}")


def inbox_app(suffix: str) -> tuple[App, InboxChannel]:
    inbox = InboxChannel(f"inbox-{suffix}")
    models = ModelRegistry()
    models.register("scripted/inbox", ScriptedModel([reply("read")], repeat_last=True))
    agent = define_agent(
        name=f"reader-{suffix}", model="scripted/inbox", instructions="Read.", channels=[inbox.name]
    )
    return App(agents=[agent], models=models, channels=[inbox]), inbox


async def test_two_workers_start_the_channel_and_its_one_message_starts_one_run(
    client: Client, task_queue: str, chamvi: ChamviClient
) -> None:
    app, inbox = inbox_app(uuid.uuid4().hex[:8])
    # a replica is its own process with its own connection: one connection serves one worker per queue
    replica = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=pydantic_data_converter,
    )
    async with (
        build_worker(client, app, task_queue=task_queue),
        build_worker(replica, app, task_queue=task_queue),
    ):

        async def both_started() -> bool | None:
            return True if len(inbox.started) == 2 else None

        await eventually(both_started, "both workers starting the channel")
        first, second = inbox.started
        assert [r.run_id for r in first] == [r.run_id for r in second]
        assert sorted(r.created for r in [*first, *second]) == [False, True]
        run = await chamvi.wait(first[0].run_id)
    assert run.status == RunStatus.COMPLETED
    assert (run.trigger.channel, run.trigger.address, run.trigger.trigger) == (inbox.name, "alice", "channel")
    assert inbox.events == ["start", "start", "stop", "stop"]


@pytest.mark.parametrize("told_by", ["plugin", "app"])
async def test_a_worker_told_to_start_no_channels_receives_nothing(
    client: Client, task_queue: str, chamvi: ChamviClient, told_by: str
) -> None:
    app, inbox = inbox_app(uuid.uuid4().hex[:8])
    if told_by == "app":
        app.start_channels = False
    plugin = ChamviPlugin(
        app,
        index=memory_index(),
        start_collections=False,
        start_channels=False if told_by == "plugin" else None,
    )
    async with build_worker(client, plugin, task_queue=task_queue):
        # a run sent through the worker proves it polls: the channel would have started by then
        manual = await chamvi.dispatch(next(iter(app.agents)))
        await chamvi.wait(manual.run_id)
    assert inbox.events == [] and inbox.started == []


class BrokenChannel(InboxChannel):
    """Fails to start or to stop, as a mailbox whose server is down would."""

    def __init__(self, name: str, fails: str) -> None:
        super().__init__(name)
        self.fails = fails

    async def start(self, ctx: ChannelContext) -> None:
        if self.fails == "start":
            raise ConnectionError("mailbox unreachable")
        self.events.append("start")

    async def stop(self) -> None:
        if self.fails == "stop":
            raise ConnectionError("mailbox went away")
        self.events.append("stop")


async def test_a_channel_failing_to_start_or_stop_and_a_failing_listener_reach_on_error(
    client: Client, task_queue: str, chamvi: ChamviClient
) -> None:
    suffix = uuid.uuid4().hex[:8]
    errors: list[tuple[BackgroundError, str | None]] = []
    never_starts, never_stops = BrokenChannel("no-start", "start"), BrokenChannel("no-stop", "stop")
    models = ModelRegistry()
    models.register("scripted/inbox", ScriptedModel([reply("read")], repeat_last=True))
    agent = define_agent(name=f"reader-{suffix}", model="scripted/inbox", instructions="Read.")
    app = App(
        agents=[agent],
        models=models,
        channels=[never_starts, never_stops],
        on_error=lambda error, run_id: errors.append((error, run_id)),
    )
    app.on("run.completed", divide_by_zero)
    async with build_worker(client, app, task_queue=task_queue):
        run = await chamvi.wait((await chamvi.dispatch(agent.name)).run_id)  # the worker serves runs

        async def heard() -> bool | None:
            return True if never_stops.events == ["start"] and len(errors) == 2 else None

        await eventually(heard, "the channel that starts starting, and the listener failing")
    assert run.status == RunStatus.COMPLETED
    reported = [(e.source, type(e.cause).__name__, run_id) for e, run_id in errors]
    # the channel's start and the run run side by side; the stop comes when the worker ends
    assert sorted(reported[:2]) == [
        ("channel.start", "ConnectionError", None),
        ("listener", "ZeroDivisionError", run.run_id),
    ]
    assert reported[2:] == [("channel.stop", "ConnectionError", None)]
    errors.sort(key=lambda reported: reported[0].source)
    assert errors[0][0].message == (
        "channel 'no-start' failed to start: ConnectionError: mailbox unreachable (the worker goes on)"
    )
