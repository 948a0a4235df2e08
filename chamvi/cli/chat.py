"""Conversations in the terminal: ``chamvi chat AGENT`` and ``chamvi conversations list / show``.

``chat`` reads one message per line, from a person at a terminal (tmux included) or from a pipe, and
prints each answer while the model writes it (through the HTTP API of ``chamvi dev`` when there is
one, else from Temporal once each step is recorded), one line per tool call, and asks a waiting
approval inline. Piped, each approval takes the next line as its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import click

from chamvi.cli._common import json_option, run_with_client, temporal_options
from chamvi.cli._follow import Api, Printer, api_options, events_of
from chamvi.cli._output import columns, dump, echo_err, short, when
from chamvi.cli.runs import _approver
from chamvi.client import AGENT_CHECK_TIMEOUT, ChamviClient
from chamvi.conversations.client import new_conversation_id
from chamvi.errors import NotFoundError
from chamvi.models.conversations import ConversationMessage
from chamvi.run_events import RUN_DELTA, RunEvent
from chamvi.settings import Settings

PROMPT = "you> "
YES = frozenset({"y", "yes"})


class _Lines:
    """Lines of stdin, read in a thread so the answer streams meanwhile; None once stdin ends."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty()

    async def read(self, prompt: str) -> str | None:
        if self.interactive:
            click.echo(prompt, nl=False)
        line: str = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return None
        line = line.rstrip("\n")
        if not self.interactive:
            click.echo(f"{prompt}{line}")  # piped: the transcript shows what was said
        return line


class ChatPrinter(Printer):
    """A turn as a chat shows it: the answer as it is written, one line per tool call."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id, as_json=False)
        self._calls: dict[str, str] = {}

    def show(self, event: RunEvent) -> None:
        """Prints one event (the approval a turn waits on is asked by the chat itself)."""
        data = event.data
        if event.type == "run.step" and data["kind"] == "llm":
            for call in data.get("tool_calls") or ():
                self._calls[str(call["id"])] = f"{call['name']}({short(call.get('arguments'), 60)})"
            if not data.get("tool_calls"):
                super().show(event)
            return
        if event.type == "run.step":
            self._end_line()
            error = data.get("error")
            result = f"error {error['code']}: {error['message']}" if error else short(data.get("output"), 80)
            called = self._calls.get(str(data.get("tool_call_id")), str(data["tool"]))
            echo_err(f"  · {called} -> {result}")
            return
        if event.type == RUN_DELTA:
            super().show(event)
        # run.started and run.resumed say nothing a person chatting needs


def _message_line(message: ConversationMessage) -> str:
    who = "you" if message.role == "user" else "agent"
    if message.role == "assistant" and message.text is None and message.error is not None:
        return f"{who}> (failed: {message.error.code}: {message.error.message})"
    waiting = f" ({message.status})" if message.status in ("queued", "running") else ""
    return f"{who}> {message.text or ''}{waiting}"


async def _turn(chamvi: ChamviClient, run_id: str, api: Api | None, lines: _Lines) -> bool:
    """Prints one turn until it ends, asking its approvals; False when stdin ended meanwhile."""
    await chamvi.conversations.turn_started(run_id)
    printer = ChatPrinter(run_id)
    async with contextlib.aclosing(events_of(chamvi, run_id, api)) as events:
        async for event in events:
            if event.type == "run.waiting":
                printer._end_line()
                answer = await lines.read(f"{event.data['title']} [y/N] ")
                if answer is None:
                    echo_err(f"the turn waits for approval: chamvi approve {run_id} (or --deny)")
                    return False
                approved = answer.strip().lower() in YES
                await chamvi.approvals.approve(
                    run_id,
                    approved=approved,
                    approval_id=str(event.data["approval_id"]),
                    approver=_approver(),
                )
            elif event.type == "run.completed":
                printer._end_line()
                output = event.data.get("output")
                if not isinstance(output, str):
                    click.echo(dump(output))
                return True
            elif event.final:
                printer._end_line()
                error = event.data.get("error") or {"code": "cancelled", "message": "the turn was cancelled"}
                echo_err(f"the turn did not complete: {error.get('code')}: {error.get('message')}")
                return True
            else:
                printer.show(event)
    return True


@click.command()
@click.argument("agent")
@click.option("--conversation", "conversation_id", help="Continue this conversation [default: a new one].")
@click.option(
    "--history",
    type=click.IntRange(0, 100),
    default=5,
    show_default=True,
    help="Earlier turns shown when a conversation continues.",
)
@temporal_options()
@api_options
def chat(agent: str, conversation_id: str | None, history: int, api: Api | None, settings: Settings) -> None:
    """Talk with AGENT: each line is a message, the answer streams in as the model writes it.

    Tool calls show one line each; a turn that waits for an approval asks it here ([y/N]). The
    conversation keeps every turn: continue it later with --conversation. Ctrl-D (end of input) ends
    the chat; piped input works too, an approval then reads the next line.
    """
    conversation = conversation_id or new_conversation_id()

    async def go(chamvi: ChamviClient) -> None:
        if not await chamvi.agents.check(agent):
            echo_err(
                f"no worker answered on task queue {settings.task_queue!r} within "
                f"{AGENT_CHECK_TIMEOUT.total_seconds():g} s: messages wait until one is up"
            )
        if conversation_id is not None:
            await _earlier(chamvi, agent, conversation, history)
        echo_err(f"conversation {conversation} with {agent} (continue it with --conversation {conversation})")
        lines = _Lines()
        while True:
            line = await lines.read(PROMPT)
            if line is None:
                return
            if not line.strip():
                continue
            sent = await chamvi.conversations.send(
                agent, line, conversation=conversation, invoker=_approver()
            )
            if not await _turn(chamvi, sent.run_id, api, lines):
                return
            # the conversation records the turn a moment after its answer: the next prompt (or a
            # `chamvi chat --conversation` right after this one ends) sees it whole
            await chamvi.conversations.wait_turn(sent)

    try:
        run_with_client(settings, go, artifacts=True)
    except KeyboardInterrupt:
        echo_err(f"\nthe conversation goes on: chamvi chat {agent} --conversation {conversation}")
        raise click.exceptions.Exit(130) from None


async def _earlier(chamvi: ChamviClient, agent: str, conversation: str, history: int) -> None:
    try:
        page = await chamvi.conversations.messages(agent, conversation, limit=max(history, 1))
    except NotFoundError:
        echo_err(f"no conversation {conversation!r} with {agent!r} yet: this starts it")
        return
    if history and page.before is not None:
        echo_err(f"... {page.before} earlier turn(s): chamvi conversations show {agent} {conversation}")
    for message in page.messages if history else ():
        click.echo(_message_line(message))


@click.group()
def conversations() -> None:
    """List and read conversations (talk with `chamvi chat`)."""


@conversations.command("list")
@click.argument("agent")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option()
@temporal_options()
def list_conversations(agent: str, limit: int, as_json: bool, settings: Settings) -> None:
    """List AGENT's conversations, the latest started first (no worker needed)."""
    found = run_with_client(settings, lambda chamvi: chamvi.conversations.list(agent, limit=limit))
    if as_json:
        click.echo(dump(found))
    elif not found:
        echo_err(f"no conversations with {agent!r}")
    else:
        for line in columns([("CONVERSATION", "SINCE"), *((c.id, when(c.started_at)) for c in found)]):
            click.echo(line)


@conversations.command("show")
@click.argument("agent")
@click.argument("conversation_id", metavar="ID")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True, help="Turns per page.")
@click.option("--before", type=click.IntRange(0), help="The turn the page ends before (see the hint).")
@json_option()
@temporal_options()
def show_conversation(
    agent: str, conversation_id: str, limit: int, before: int | None, as_json: bool, settings: Settings
) -> None:
    """Show conversation ID of AGENT: its messages, the latest turns first paged, oldest first."""
    page = run_with_client(
        settings,
        lambda chamvi: chamvi.conversations.messages(agent, conversation_id, limit=limit, before=before),
        artifacts=True,
    )
    if as_json:
        click.echo(dump(page))
        return
    details: list[Any] = [f"conversation {page.id} with {page.agent}, {page.turns} turn(s)"]
    if page.taint is not None:
        details.append(f"tainted by {page.taint}")
    echo_err("; ".join(details))
    for message in page.messages:
        click.echo(f"[{message.turn}] {_message_line(message)}")
    if page.before is not None:
        echo_err(f"earlier: chamvi conversations show {agent} {conversation_id} --before {page.before}")
