"""What one tool call knows of its run: who and what started it, recorded effects, approval answers.

Separate from ``chamvi.tools`` so that channels, tools and the tool runner share these parts without
importing each other.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from chamvi._constants import APPROVAL_TIMEOUT_MAX, DEFAULT_APPROVAL_TIMEOUT
from chamvi.errors import InvalidInputError
from chamvi.models import (
    ApprovalDecision,
    ApprovalRequest,
    ExtractionRequest,
    RunInput,
    RunView,
    RunWaitRequest,
    TriggerEnvelope,
)


@dataclass(frozen=True)
class RunContext:
    """The part of a run a tool may read."""

    run_id: str
    agent: str
    trigger: TriggerEnvelope
    cancellation: asyncio.Event
    step: int
    tool_call_id: str
    skills_version: str | None = None
    """The skill catalog version the run recorded at its start (``chamvi.skills``); None: no skills."""


class EffectLedger:
    """Recorded effect results of one run, as seen from inside one tool call.

    ``lookup`` asks the run (outside history) for keys recorded by earlier calls; ``record`` keeps
    new results, which the tool call returns to the workflow to keep; ``record_now`` also hands the
    result to the run at once (``persist``), for effects that must survive the call being cut short.
    """

    def __init__(
        self,
        lookup_recorded: Callable[[str], Awaitable[tuple[bool, Any]]],
        persist: Callable[[str, Any], Awaitable[None]] | None = None,
    ) -> None:
        self._lookup_recorded = lookup_recorded
        self._persist = persist
        self.new: dict[str, Any] = {}

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` for a key recorded by this call or an earlier one, else ``(False, None)``."""
        if key in self.new:
            return True, self.new[key]
        return await self._lookup_recorded(key)

    def record(self, key: str, result: Any) -> None:
        """Keeps ``result`` under ``key``; the workflow stores it when the call returns."""
        self.new[key] = result

    async def record_now(self, key: str, result: Any) -> None:
        """Keeps ``result`` and records it in the run before returning (the seed's emit window).

        A message sent and then lost with its worker before the call returned would be sent again by
        the retried call; recorded here, the retry finds the key and sends nothing.
        """
        self.new[key] = result
        if self._persist is not None:
            await self._persist(key, result)


def input_digest(arguments: dict[str, Any]) -> str:
    """A digest of a tool call's arguments, to bind a decision to the input it was given for."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


class Approvals:
    """The answers a tool call has been given so far, taken in the order its ``approve()`` calls ask.

    A tool call that needs an approval stops and runs again from the start once a person answered,
    so its n-th ``approve()`` gets the n-th answer, but only if the call's input is still the one the
    person saw: the tool runner tells it the input (:meth:`bind`), and an answer given for other
    arguments counts as none, so the person is asked again.
    """

    def __init__(self, decisions: list[ApprovalDecision] | None = None, *, waits: int = 0) -> None:
        self._decisions = list(decisions or [])
        self._asked = 0
        self.waits = waits
        """How many times the run waited for this call so far: the next wait is ``approval_id(step,
        call id, waits)``, the approval this attempt's unanswered ``approve()`` makes the run wait on."""
        self.input: dict[str, Any] | None = None
        self._digest: str | None = None

    def bind(self, arguments: dict[str, Any]) -> None:
        """The call's input as of now (the model's, then as ``before_tool_execution`` rewrote it)."""
        self.input = arguments
        self._digest = input_digest(arguments)

    @property
    def next_index(self) -> int:
        """The position of the next ``approve()`` of this call."""
        return self._asked

    def _answer(self, index: int) -> ApprovalDecision | None:
        decision = self._decisions[index] if index < len(self._decisions) else None
        if decision is not None and decision.input_digest not in (None, self._digest):
            return None  # given for other arguments
        return decision

    @property
    def next_is_answered(self) -> bool:
        """Whether the next ``approve()`` has an answer for this input (a person saw the request)."""
        return self._answer(self._asked) is not None

    def take(self) -> ApprovalDecision | None:
        """The answer to the next ``approve()``, or None when nobody answered it for this input yet."""
        index = self._asked
        self._asked += 1
        return self._answer(index)

    def request(self, title: str, body: str | None, timeout: timedelta) -> ApprovalRequest:
        """The request for the ``approve()`` just taken, carrying the input it is about."""
        return ApprovalRequest(
            title=title,
            body=body,
            timeout_seconds=timeout.total_seconds(),
            index=self._asked - 1,
            input=self.input,
            input_digest=self._digest,
        )


class RunWaitRequired(BaseException):
    """Unwinds a tool call waiting for another run's outcome that is not recorded yet.

    The run waits for it (an activity of its own), then runs the call again, as after an approval.
    """

    def __init__(self, request: RunWaitRequest) -> None:
        super().__init__(request.run_id)
        self.request = request


class RunStarter(Protocol):
    """Starts a run as any dispatch does (idempotency and concurrency keys included)."""

    async def start(self, run_input: RunInput) -> str:
        """The run's id; an idempotency key seen before answers the existing run."""
        ...


class LinkedRuns:
    """Runs a tool call starts (``ctx.dispatch``) and waits for (``ctx.wait_for``).

    A started run is a run of its own, linked to this one: it inherits the invoker and, when this
    run is tainted, the taint; its id is recorded like an effect, so a call that runs again starts
    nothing twice. Its outcome is recorded the same way once this run has waited for it.
    """

    def __init__(self, run: RunContext, effects: EffectLedger, starter: RunStarter, tainted: bool) -> None:
        self._run = run
        self._effects = effects
        self._starter = starter
        self._tainted = tainted
        self._started = 0

    async def dispatch(
        self,
        agent: str,
        payload: Any = None,
        *,
        idempotency_key: str | None = None,
        concurrency_key: str | None = None,
        channel: str | None = None,
        address: str | None = None,
    ) -> str:
        """Starts a run of ``agent`` and answers its id (see :meth:`ToolContext.dispatch`)."""
        index = self._started
        self._started += 1
        key = idempotency_key or f"{self._run.step}:{self._run.tool_call_id}:{index}"
        digest = hashlib.sha256(json.dumps([agent, key]).encode()).hexdigest()
        effect_key = f"{self._run.run_id}:dispatch:{digest}"
        found, recorded = await self._effects.lookup(effect_key)
        if found:
            return str(recorded)
        run_id = await self._starter.start(
            RunInput(
                agent=agent,
                payload=payload,
                trigger="run",
                channel=channel,
                address=address,
                invoker=self._run.trigger.invoker,
                idempotency_key=f"{self._run.run_id}:{key}",
                concurrency_key=concurrency_key,
                parent_run_id=self._run.run_id,
                inherited_taint=f"run:{self._run.run_id}" if self._tainted else None,
            )
        )
        self._effects.record(effect_key, run_id)
        return run_id

    async def wait_for(self, run_id: str) -> RunView:
        """The outcome of ``run_id`` once it ended (see :meth:`ToolContext.wait_for`)."""
        key = f"{self._run.run_id}:wait:{run_id}"
        found, recorded = await self._effects.lookup(key)
        if found:
            return RunView.model_validate(recorded)
        raise RunWaitRequired(RunWaitRequest(run_id=run_id, key=key))


class ExtractionRequired(BaseException):
    """Unwinds a tool call whose ``extract()`` has no recorded result yet.

    The run makes the extraction (an activity of its own), then runs the call again. A
    ``BaseException`` for the reason :class:`ApprovalRequired` is one.
    """

    def __init__(self, request: ExtractionRequest) -> None:
        super().__init__(request.key)
        self.request = request


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
    raise ApprovalRequired(approvals.request(title, body, timeout))
