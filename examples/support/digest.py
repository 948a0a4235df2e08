"""The daily digest: a scheduled agent that sums up the open orders and posts the digest once per run.

``app.py`` declares its schedule (``App(schedules=[define_schedule("digest", cron="0 8 * * *",
...)])``): every worker's start creates or updates the Temporal Schedule
``chamvi-schedule:daily-digest``, and each fire dispatches an ordinary run of this agent. With the
``local/demo`` model the run calls ``count_orders`` and ``post_digest`` (the payload's ``period``
fills them) and answers one line per result.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chamvi import Agent, Budget, ToolContext, define_agent, effect_marker, effect_tool, tool, try_inject
from chamvi.context import DATA_FOLDER


def data_folder(ctx: ToolContext) -> Path:
    """The worker's data folder (``chamvi dev --data``, ``chamvi worker --data``), else ``CHAMVI_DATA``
    (a worker built without settings, as in tests), else ``.chamvi``."""
    return try_inject(ctx, DATA_FOLDER) or Path(os.environ.get("CHAMVI_DATA", ".chamvi"))


def digest_path(ctx: ToolContext) -> Path:
    """Digests land here, one JSON line each (a stand-in for a team chat or a mail)."""
    return data_folder(ctx) / "digests.jsonl"


def define_digest(orders: Mapping[str, Mapping[str, Any]]) -> Agent:
    """The ``digest`` agent over ``orders`` (the support example's order book)."""

    def counts() -> dict[str, int]:
        return dict(Counter(str(order["status"]) for order in orders.values()))

    @tool
    async def count_orders(period: str) -> dict[str, object]:
        """Counts the orders by delivery status for the digest of ``period`` (e.g. "yesterday")."""
        return {"period": period, "orders": len(orders), "by_status": counts()}

    def _already_posted(key: str, _input: object, ctx: ToolContext) -> dict[str, str] | None:
        path = digest_path(ctx)
        if path.exists() and effect_marker(key) in path.read_text():
            return {"status": "posted earlier"}
        return None

    @effect_tool(effect_key=lambda args, ctx: f"{ctx.run.run_id}:digest", already_applied=_already_posted)
    async def post_digest(period: str, ctx: ToolContext) -> dict[str, str]:
        """Posts the digest of ``period``. Once per run, even when a worker dies after posting."""
        summary = ", ".join(f"{count} {status}" for status, count in sorted(counts().items()))
        path = digest_path(ctx)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"period": period, "summary": summary, "marker": effect_marker(f"{ctx.run.run_id}:digest")}
        with path.open("a") as digests:
            digests.write(json.dumps(line) + "\n")
        return {"status": "posted", "summary": summary}

    return define_agent(
        name="digest",
        model=os.environ.get("CHAMVI_SUPPORT_MODEL", "local/demo"),
        instructions=(
            "You write the support team's daily digest: count the orders by status for the period in "
            "the payload, post the digest once, and answer with its one-line summary."
        ),
        tools=[count_orders, post_digest],
        budget=Budget(max_steps=6),
    )
