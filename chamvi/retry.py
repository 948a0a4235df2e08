"""Retry policies: what chamvi retries, how often, and how long it waits, decided in one place.

Activities never decide at a raise site: an activity raises a ``ChamviError`` and the activity
boundary turns it into a failure typed by its code (``chamvi._activity_boundary``); every policy here
lists the codes of the non-retryable errors its activity can raise (kept short: every scheduled
activity carries its policy into the run's history), so a deterministic mistake fails at once and a
provider that is down
is tried again, waiting as long as it asked (``retry_after``).

Part of the shared kernel: workflows import it, so it loads no I/O client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from temporalio.common import RetryPolicy

from chamvi.errors import (
    AgentNotFoundError,
    ArtifactNotFoundError,
    ChamviError,
    ChamviValidationError,
    ConflictError,
    InvalidAgentDefinitionError,
    InvalidAppError,
    InvalidInputError,
    InvalidRunStateError,
    KnowledgeNotReadyError,
    ModelError,
    ModelNotFoundError,
    StoreDamagedError,
)
from chamvi.models.runs import RetrySpec

T = TypeVar("T")

AGENT_LOOKUP_FAILURES: tuple[type[ChamviError], ...] = (
    AgentNotFoundError,
    ModelNotFoundError,
    InvalidAgentDefinitionError,
    InvalidAppError,
)
"""What describing an agent fails with for good: an agent or model the app does not have."""
DISPATCH_CHECK_FAILURES: tuple[type[ChamviError], ...] = (*AGENT_LOOKUP_FAILURES, ChamviValidationError)
"""What a check before a dispatch fails with for good: what describing an agent does, and settings the
agent does not let a dispatch set."""
AGENT_REGISTRY_FAILURES: tuple[type[ChamviError], ...] = (
    *AGENT_LOOKUP_FAILURES,
    ChamviValidationError,
    ConflictError,
    InvalidInputError,
)
"""What a put, remove or read of runtime agents fails with for good: an invalid definition, a name in
code, an agent or revision that is not there."""
MODEL_CALL_FAILURES: tuple[type[ChamviError], ...] = (
    ModelError,
    ArtifactNotFoundError,
    InvalidRunStateError,
)
"""What a model call fails with for good: a provider's refusal, an attachment or a part's artifact
the store does not hold, a transcript holding a system message. An agent the worker does not know
mid-run is retried, as is a provider that may answer later: in a rolling deploy, the next attempt may
reach a worker that has the agent."""
TOOL_CALL_FAILURES: tuple[type[ChamviError], ...] = ()
"""Nothing: the tool runner reports a tool's own failures as results, and an agent unknown mid-run is
retried (a rolling deploy)."""
MCP_LISTING_FAILURES: tuple[type[ChamviError], ...] = (InvalidAgentDefinitionError,)
"""What listing an MCP server's tools fails with for good: a tool the app names that the server does
not list, or one under a name models refuse. A server that is down is tried again, and so is a server
the worker's app does not declare (a rolling deploy)."""
SEARCH_FAILURES: tuple[type[ChamviError], ...] = (
    *AGENT_LOOKUP_FAILURES,
    KnowledgeNotReadyError,
    ChamviValidationError,
    ModelError,
    StoreDamagedError,
)
"""What a knowledge search fails with for good: a collection not ready, a bad query, a refused embedding,
a damaged collection (until it is rebuilt)."""


def non_retryable(failures: tuple[type[ChamviError], ...]) -> list[str]:
    """The codes of ``failures`` that retrying cannot fix, for ``non_retryable_error_types``."""
    return sorted({error.code for error in failures if not error.retryable})


DEFAULT_MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=10,
)
DEFAULT_TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=10,
)
"""Bounded: a tool call whose worker keeps dying, or that keeps timing out, fails the run in the end
(a tool that raises is a tool error the model sees, and is never retried; chamvi's own bookkeeping
that cannot reach the Temporal server or a store is, ``infrastructure_unavailable``)."""
DEFAULT_EMBEDDING_RETRY = RetryPolicy(maximum_attempts=1)
"""One attempt per embedding call inside a pass or a search: a failed pass is retried as a whole on
the collection's backoff (``backoff``), the seed's rule."""


@dataclass(frozen=True)
class RetryPolicies:
    """How an app's model calls, tool calls and embedding calls are retried (Temporal's ``RetryPolicy``).

    Args:
        model: each model call (an activity).
        tool: each tool call (an activity); a tool's own ``retry=`` wins over it.
        embedding: each embedding call inside a knowledge pass or a search (retried in the activity,
            honouring a provider's ``retry-after``).
    """

    model: RetryPolicy = field(default_factory=lambda: DEFAULT_MODEL_RETRY)
    tool: RetryPolicy = field(default_factory=lambda: DEFAULT_TOOL_RETRY)
    embedding: RetryPolicy = field(default_factory=lambda: DEFAULT_EMBEDDING_RETRY)


def retry_spec(policy: RetryPolicy) -> RetrySpec:
    """``policy`` as data for an ``AgentSpec``."""
    return RetrySpec(
        initial_interval_seconds=policy.initial_interval.total_seconds(),
        backoff_coefficient=policy.backoff_coefficient,
        maximum_interval_seconds=(
            policy.maximum_interval.total_seconds() if policy.maximum_interval is not None else None
        ),
        maximum_attempts=policy.maximum_attempts,
        non_retryable_error_types=list(policy.non_retryable_error_types or ()),
    )


def activity_policy(
    spec: RetrySpec | None, default: RetryPolicy, failures: tuple[type[ChamviError], ...]
) -> RetryPolicy:
    """The policy an activity runs under: ``spec`` (or ``default``), never retrying ``failures``.

    A user's policy can add codes but not drop chamvi's, so a deterministic mistake is never retried.
    """
    if spec is None:
        spec = retry_spec(default)
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.initial_interval_seconds),
        backoff_coefficient=spec.backoff_coefficient,
        maximum_interval=(
            timedelta(seconds=spec.maximum_interval_seconds)
            if spec.maximum_interval_seconds is not None
            else None
        ),
        maximum_attempts=spec.maximum_attempts,
        non_retryable_error_types=sorted({*spec.non_retryable_error_types, *non_retryable(failures)}),
    )


def is_retried(error: BaseException, policy: RetryPolicy) -> bool:
    """Whether ``policy`` tries again after ``error``, as Temporal would for an activity."""
    if isinstance(error, ChamviError):
        return error.retryable and error.code not in (policy.non_retryable_error_types or ())
    return isinstance(error, Exception)


def delay_before(attempt: int, policy: RetryPolicy, retry_after: float | None = None) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based); a provider's ``retry_after`` wins."""
    if retry_after is not None:
        return retry_after
    delay = policy.initial_interval.total_seconds() * policy.backoff_coefficient ** (attempt - 1)
    if policy.maximum_interval is not None:
        delay = min(delay, policy.maximum_interval.total_seconds())
    return delay


async def call_with_retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Runs ``call`` under ``policy`` inside one activity (embedding calls, which are not activities)."""
    attempt = 1
    while True:
        try:
            return await call()
        except Exception as error:
            exhausted = policy.maximum_attempts > 0 and attempt >= policy.maximum_attempts
            if exhausted or not is_retried(error, policy):
                raise
            retry_after = error.retry_after if isinstance(error, ChamviError) else None
            await sleep(delay_before(attempt, policy, retry_after))
            attempt += 1


PASS_HEARTBEAT_INTERVAL = timedelta(seconds=10)
"""A running knowledge pass reports its counts this often (the Temporal UI shows them as heartbeat
details)."""
PASS_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
"""A pass silent this long is lost (its worker was killed): the workflow fails it and, after the
backoff, runs the next attempt on whichever worker polls. Three intervals, so one late heartbeat on
a loaded machine is no loss, and a killed worker's pass resumes within about half a minute."""


def backoff(failures: int) -> timedelta:
    """The seed's backoff for failed knowledge passes: 5 s, doubling, at most 5 min per failure in a row."""
    return timedelta(seconds=min(5 * 2 ** (failures - 1), 300))
