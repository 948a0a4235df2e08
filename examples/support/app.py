"""The support example: an agent that searches the support handbook, looks up an order, refunds it
after a person approves, and replies to the customer exactly once. It remembers every refund it made
(its state collection ``refunds``), so an order's lookup shows the customer's past refunds. Before it
refunds, it loads its ``refund-procedure`` skill (``skills/refund-procedure/SKILL.md``) and follows it.

Runs offline with the ``local/demo`` model (deterministic, no weights: it calls each tool whose
required arguments the payload has, once, in the order below, with arguments from the payload's
fields of the same names: ``query``, ``order_id``, ``amount``, ``to``, ``body``) and the
``local/all-minilm-l6-v2`` embedding model shipped with chamvi. Set
``CHAMVI_SUPPORT_MODEL=openai/gpt-4o-mini`` and ``OPENAI_API_KEY`` to run it on a real model,
``CHAMVI_HANDBOOK_MODEL=openai/text-embedding-3-small`` to embed the handbook with OpenAI.

It is also a chat: ``chamvi chat support`` (or the page's Chat tab, or ``POST
/conversations/support/<id>/messages``) talks with it across turns, each turn recalling the ones
before it within its ``RecallPolicy`` (the latest 20 messages here).

Tickets arrive through the ``tickets`` webhook channel (``POST /channels/tickets/events`` on the HTTP
API, signed with ``CHAMVI_TICKETS_SECRET``) and start a ``ticket-desk`` run; its answer goes back
through the same channel to ``CHAMVI_TICKETS_URL`` (the tracker's webhook), or to the console when
that is unset.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from chamvi import (
    AgentState,
    App,
    Budget,
    ChannelSubscription,
    RecallPolicy,
    ToolContext,
    approve,
    console_channel,
    define_agent,
    define_schedule,
    effect_marker,
    effect_tool,
    tool,
    webhook_channel,
)
from chamvi.knowledge import folder, knowledge_collection, knowledge_tools
from chamvi.skills import skills_folder

from .digest import data_folder, define_digest
from .wiki_agent import librarian

ORDERS = {
    "A-1001": {"customer": "ada@example.com", "total": 25.0, "status": "delivered"},
    "A-1002": {"customer": "grace@example.com", "total": 80.0, "status": "in transit"},
}


def outbox_path(ctx: ToolContext) -> Path:
    """Replies land here, one JSON line each (a stand-in for a mail or ticket API): in the worker's data
    folder (``--data``), else ``CHAMVI_DATA``'s."""
    return data_folder(ctx) / "outbox.jsonl"


class Refund(BaseModel):
    """A refund the agent made, remembered across runs under its order id."""

    customer: str
    order_id: str
    amount: float
    run_id: str


@tool
async def lookup_order(order_id: str, ctx: ToolContext) -> dict[str, object]:
    """Looks up an order by id (e.g. A-1001): customer, total, delivery status, and the customer's
    past refunds."""
    order = ORDERS.get(order_id)
    if order is None:
        raise LookupError(f"no order {order_id!r}")
    past = await ctx.state.collection("refunds").list(where={"customer": str(order["customer"])})
    refunds = [item.value.model_dump(exclude={"customer"}) for item in past.items]
    return {"order_id": order_id, **order, "past_refunds": refunds}


async def _already_refunded(key: str, args: Any, ctx: ToolContext) -> str | None:
    # the refund's state item keeps the effect key that wrote it: a redone call finds its own write
    if await ctx.state.collection("refunds").written_by(args.order_id) == key:
        return f"Refunded {args.amount:.2f} on order {args.order_id}."
    return None


@effect_tool(already_applied=_already_refunded)
async def refund_order(order_id: str, amount: float, ctx: ToolContext) -> str:
    """Refunds an amount on an order. A person must approve every refund."""
    decision = await approve(
        ctx,
        title=f"Refund {amount:.2f} on order {order_id}?",
        body=f"Requested in run {ctx.run.run_id}.",
        timeout=timedelta(hours=24),
    )
    if not decision.approved:
        return f"Not refunded: {decision.reason or 'denied'}"
    customer = str(ORDERS[order_id]["customer"]) if order_id in ORDERS else "unknown"
    refund = Refund(customer=customer, order_id=order_id, amount=amount, run_id=ctx.run.run_id)
    await ctx.state.collection("refunds").upsert(order_id, refund, effect_key=ctx.effect_key)
    return f"Refunded {amount:.2f} on order {order_id}."


def _already_replied(key: str, _input: object, ctx: ToolContext) -> dict[str, str] | None:
    path = outbox_path(ctx)
    if path.exists() and effect_marker(key) in path.read_text():
        return {"status": "sent earlier"}
    return None


@effect_tool(
    effect_key=lambda args, ctx: f"{ctx.run.run_id}:reply:{args.to}",
    already_applied=_already_replied,
)
async def send_reply(to: str, body: str, ctx: ToolContext) -> dict[str, str]:
    """Sends the reply to the customer. Sent once per run and customer, even after a crash."""
    key = f"{ctx.run.run_id}:reply:{to}"
    path = outbox_path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as outbox:
        outbox.write(json.dumps({"to": to, "body": body, "marker": effect_marker(key)}) + "\n")
    channel = ctx.channels.find_one("console")
    if channel is not None:
        await channel.emit(body, title=f"reply to {to}")
    return {"status": "sent"}


TEAMS = {"refund": "billing", "invoice": "billing", "order": "shipping", "delivery": "shipping"}
DEV_TICKETS_SECRET = "dev-tickets-secret-change-me"
"""The secret ``chamvi dev`` accepts when ``CHAMVI_TICKETS_SECRET`` is unset: set your own anywhere else."""


@tool
async def answer_ticket(ticket: int, subject: str, ctx: ToolContext) -> str:
    """Routes a ticket to a team by its subject and tells the reporter, on the ticket it came from."""
    words = subject.lower()
    team = next((name for word, name in TEAMS.items() if word in words), "support")
    reply = f"Thanks for ticket #{ticket} ({subject!r}): the {team} team has it and answers within a day."
    senders = {handle.name: handle for handle in ctx.channels.find()}
    # back through the tracker's webhook when it has one; else the console shows the answer
    handle = senders.get(ctx.run.trigger.channel or "") or senders["console"]
    await handle.emit(reply, title=f"Re: {subject}")
    return f"routed to {team}"


tickets = webhook_channel(
    "tickets",
    secret=os.environ.get("CHAMVI_TICKETS_SECRET") or DEV_TICKETS_SECRET,
    url=os.environ.get("CHAMVI_TICKETS_URL") or None,
    address_of=lambda event: (
        f"ticket-{event['ticket']}" if isinstance(event, dict) and "ticket" in event else None
    ),
)

ticket_desk = define_agent(
    name="ticket-desk",
    model=os.environ.get("CHAMVI_SUPPORT_MODEL", "local/demo"),
    instructions="Route the new ticket in the trigger to a team and tell its reporter, on the ticket, once.",
    tools=[answer_ticket],
    budget=Budget(max_steps=4),
    channels=[
        ChannelSubscription(
            "tickets",
            id="new-tickets",
            filter=lambda event: (
                isinstance(event.payload, dict) and event.payload.get("action", "opened") == "opened"
            ),
        )
    ],
)

handbook = knowledge_collection(
    "handbook",
    model=os.environ.get("CHAMVI_HANDBOOK_MODEL", "local/all-minilm-l6-v2"),
    sources=[folder(Path(__file__).parent / "handbook")],
)

support = define_agent(
    name="support",
    model=os.environ.get("CHAMVI_SUPPORT_MODEL", "local/demo"),
    instructions=(
        "You are a support agent. Search the handbook for the policy that applies, look the order up, "
        "refund it when the customer asks for a refund and the policy allows it (a person approves "
        "every refund), then reply to the customer once."
    ),
    tools=[*knowledge_tools(collections=["handbook"], top_k=3), lookup_order, refund_order, send_reply],
    budget=Budget(max_steps=12),
    channels=["console"],
    state=AgentState(collections={"refunds": Refund}),
    # the refund procedure (skills/refund-procedure/SKILL.md), which it loads before refunding
    skills=[skills_folder(Path(__file__).parent / "skills")],
    # in a conversation, each turn recalls the latest 20 messages (10 questions and answers)
    conversation=RecallPolicy(max_messages=20),
)

digest = define_digest(ORDERS)

app = App(
    agents=[support, librarian, ticket_desk, digest],
    channels=[console_channel(), tickets],
    collections=[handbook],
    # a Temporal Schedule that every worker's start creates or updates; each fire is an ordinary run
    schedules=[
        define_schedule("digest", cron="0 8 * * *", id="daily-digest", payload={"period": "yesterday"})
    ],
    # what agents defined at runtime may use (`chamvi agents put examples/support/agents/faq.yaml`)
    runtime_tools=[*knowledge_tools(collections=["handbook"], top_k=3)],
)
