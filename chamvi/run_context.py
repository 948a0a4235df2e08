"""What one tool call knows of its run: who and what started it, recorded effects, approval answers.

Separate from ``chamvi.tools`` so that channels, tools and the tool runner share these parts without
importing each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from chamvi.constants import APPROVAL_TIMEOUT_MAX, DEFAULT_APPROVAL_TIMEOUT
from chamvi.errors import InvalidInputError
from chamvi.models import ApprovalDecision, ApprovalRequest, TriggerEnvelope


@dataclass(frozen=True)
class RunContext:
    """The part of a run a tool may read."""

    run_id: str
    agent: str
    trigger: TriggerEnvelope
    cancellation: asyncio.Event
    step: int
    tool_call_id: str


class EffectLedger:
    """Recorded effect results of one run, as seen from inside one tool call.

    ``lookup`` asks the run (outside history) for keys recorded by earlier calls; ``record`` keeps
    new results, which the tool call returns to the workflow to keep.
    """

    def __init__(self, lookup_recorded: Callable[[str], Awaitable[tuple[bool, Any]]]) -> None:
        self._lookup_recorded = lookup_recorded
        self.new: dict[str, Any] = {}

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` for a key recorded by this call or an earlier one, else ``(False, None)``."""
        if key in self.new:
            return True, self.new[key]
        return await self._lookup_recorded(key)

    def record(self, key: str, result: Any) -> None:
        """Keeps ``result`` under ``key``; the workflow stores it when the call returns."""
        self.new[key] = result


class Approvals:
    """The answers a tool call has been given so far, taken in the order its ``approve()`` calls ask.

    A tool call that needs an approval stops and runs again from the start once a person answered,
    so its n-th ``approve()`` gets the n-th answer.
    """

    def __init__(self, decisions: list[ApprovalDecision] | None = None) -> None:
        self._decisions = list(decisions or [])
        self._asked = 0

    @property
    def next_index(self) -> int:
        """The position of the next ``approve()`` of this call."""
        return self._asked

    @property
    def next_is_answered(self) -> bool:
        """Whether the next ``approve()`` has an answer already (a person saw the request before)."""
        return self._asked < len(self._decisions)

    def take(self) -> ApprovalDecision | None:
        """The answer to the next ``approve()``, or None when nobody answered it yet."""
        index = self._asked
        self._asked += 1
        return self._decisions[index] if index < len(self._decisions) else None


class ApprovalRequired(BaseException):
    """Unwinds a tool call that needs a decision nobody has given yet.

    A ``BaseException`` so that a tool's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(request.title)
        self.request = request


def request_approval(
    approvals: Approvals,
    *,
    title: str,
    body: str | None = None,
    timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
) -> ApprovalDecision:
    """The answer to this approval, or :class:`ApprovalRequired` to make the run wait for one.

    Raises:
        InvalidInputError: the timeout is out of range.
        ApprovalRequired: nobody answered yet; the run waits (the tool call stops here).
    """
    if timeout <= timedelta(0) or timeout > APPROVAL_TIMEOUT_MAX:
        raise InvalidInputError(
            f"approval timeout {timeout} is out of range: "
            f"it must be above 0 and at most {APPROVAL_TIMEOUT_MAX}"
        )
    decision = approvals.take()
    if decision is not None:
        return decision
    raise ApprovalRequired(ApprovalRequest(title=title, body=body, timeout_seconds=timeout.total_seconds()))
