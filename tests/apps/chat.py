"""An app for conversation tests: a scripted agent that answers what it saw, in process or in a worker.

The model's answer names the message it answers and every earlier message it recalled, so a test
reads from the stored answers what each turn saw. ``refund ...`` asks a person first; ``slow ...``
calls a tool that notes itself under CHAMVI_TEST_DIR and hangs on its first attempt, so a test can
kill the worker mid-turn.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from chamvi import ActivityTimeouts, App, RecallPolicy, ToolContext, approve, define_agent, tool
from chamvi.models import ModelResponse
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply


def _note(line: str) -> None:
    folder = os.environ.get("CHAMVI_TEST_DIR")
    if folder:
        with (Path(folder) / "events.txt").open("a") as file:
            file.write(line + "\n")


def _events() -> str:
    path = Path(os.environ.get("CHAMVI_TEST_DIR", "/nonexistent")) / "events.txt"
    return path.read_text() if path.exists() else ""


@tool
async def refund_order(order_id: str, amount: float, ctx: ToolContext) -> str:
    """Refunds an order once a person approves."""
    decision = await approve(ctx, title=f"Refund {amount:.2f} on order {order_id}?")
    return f"refunded {amount:.2f}" if decision.approved else f"not refunded: {decision.reason or 'denied'}"


@tool
async def slow_lookup(topic: str, ctx: ToolContext) -> str:
    """Looks a topic up; hangs on its first attempt so a test can kill the worker meanwhile."""
    _note(f"lookup-started {ctx.run.run_id}")
    if _events().count("lookup-started") == 1:
        await asyncio.sleep(60)
    return f"found {topic}"


def answer(request: ChatRequest) -> ScriptedTurn:
    """Answers the last message, naming what came before; calls a tool first when asked."""
    own = request.messages[request.transcript_start :]
    text = own[0].content or ""
    if request.step == 0 and text.startswith("refund"):
        return call("refund_order", order_id="A-1001", amount=25.0)
    if request.step == 0 and text.startswith("slow"):
        return call("slow_lookup", topic=text)
    earlier = [m.content for m in request.messages[: request.transcript_start] if m.role == "user"]
    summary = [
        m.content or "" for m in request.messages if m.role == "system" and "Summary" in (m.content or "")
    ]
    tools = [m.content for m in own if m.role == "tool"]
    recalled_tools = [m.content for m in request.messages[: request.transcript_start] if m.role == "tool"]
    parts = [f"re: {text}", f"earlier: {earlier}"]
    if tools:
        parts.append(f"tools: {tools}")
    if recalled_tools:
        parts.append(f"recalled tools: {recalled_tools}")
    if summary:
        parts.append(f"summary: {summary[0].splitlines()[-1]}")
    return reply(" | ".join(parts))


def summarize(request: ChatRequest) -> ScriptedTurn:
    """A summarizer that lists the people's lines it folds."""
    lines = (request.messages[-1].content or "").splitlines()
    people = [line.removeprefix("Person: ") for line in lines if line.startswith("Person: ")]
    before = [line for line in lines if line.startswith("folded")]
    return reply("\n".join([*before, f"folded {people}"]))


class StreamingScripted(ScriptedModel):
    """The scripted answers, streamed word by word to the run's delta listeners as a real model does."""

    async def complete(self, request: ChatRequest) -> ModelResponse:
        response = await super().complete(request)
        text = response.message.content or ""
        if request.on_delta is not None and text:
            # "stream ..." writes slowly, so a reader that joins late still sees the words come
            pause = 0.1 if text.startswith("re: stream") else 0
            for word in text.split(" "):
                request.on_delta("text", word + " ")
                await asyncio.sleep(pause)
        return response


def make_app(*, recall: RecallPolicy | None = None, untrusted: bool = False) -> App:
    """The chat app; ``recall`` for the ``chat`` agent's policy."""
    from chamvi.channels import console_channel

    models = ModelRegistry()
    models.register("scripted/chat", StreamingScripted([answer], repeat_last=True))
    models.register("scripted/summarizer", ScriptedModel([summarize], repeat_last=True))
    channel = console_channel("inbox", write=lambda line: _note(f"inbox {line}"))
    if untrusted:
        channel.untrusted = True
    return App(
        agents=[
            define_agent(
                name="chat",
                model="scripted/chat",
                instructions="Answer.",
                tools=[refund_order, slow_lookup],
                conversation=recall,
            )
        ],
        models=models,
        channels=[channel],
        timeouts=ActivityTimeouts(model=timedelta(seconds=10), tool_heartbeat=timedelta(seconds=2)),
    )


app = make_app()
