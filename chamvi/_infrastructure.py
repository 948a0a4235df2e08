"""Infrastructure failures in a tool call: chamvi's own bookkeeping, not the tool, could not go on.

A tool call leans on bookkeeping the model knows nothing of: it asks its run (a Temporal query)
whether an effect is recorded, records an emit (a signal), starts the runs ``ctx.dispatch`` asks for,
reads and writes the agent's state (Qdrant) and the run's artifacts (the object store). When one of
those cannot reach its server, the call learned nothing about the tool; made into a tool error, the
model would read it and the run could end without the effect (a Temporal server restarted under
running tools did exactly that). So each bookkeeping method is wrapped in :func:`bookkeeping`, which
turns a transport failure into ``InfrastructureUnavailableError``; the tool runner lets it fail the
tool activity and Temporal runs the call again once the server is back, where the ledger is asked
again and finds an effect that was applied.

The line is drawn at chamvi's methods, not at exception types: a ``ConnectionError`` of an HTTP API
the tool's own body calls stays a tool error the model reads, as before. A tool that catches the
bookkeeping failure itself does not hide it: :func:`watching` notes every one raised during the
call, and the runner raises the first after the tool returned.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

from obstore.exceptions import GenericError
from temporalio.client import RPCTimeoutOrCancelledError
from temporalio.service import RPCError

from chamvi.errors import ChamviError, InfrastructureUnavailableError

P = ParamSpec("P")
T = TypeVar("T")

TRANSPORT_FAILURES: tuple[type[BaseException], ...] = (
    RPCError,  # the Temporal client, once its own retries gave up (``tcp connect error``)
    RPCTimeoutOrCancelledError,
    OSError,  # ConnectionError, TimeoutError, a local store's disk
    GenericError,  # obstore: a request to the object store that did not go through
)
"""What a store or server that did not answer raises; a ``ChamviError`` never counts (it says what
was wrong already, e.g. an artifact that is not there)."""

_RETRIED_STATUSES = frozenset({429, *range(500, 600)})
"""A Qdrant server's answers that say "not now": busy, or failing itself."""


def _http_failures(error: BaseException) -> bool:
    """The transport failures of httpx and qdrant-client, looked up only where those are loaded.

    The command line imports this module (through ``chamvi.artifacts``) and must not load them
    (``test_cli_imports``); a client that is not loaded raised nothing.
    """
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(error, httpx.TransportError):
        return True
    qdrant = sys.modules.get("qdrant_client.http.exceptions")
    if qdrant is None:
        return False
    if isinstance(error, qdrant.ResponseHandlingException):  # no response from the server
        return True
    return isinstance(error, qdrant.UnexpectedResponse) and error.status_code in _RETRIED_STATUSES

_FAILURES: ContextVar[list[InfrastructureUnavailableError] | None] = ContextVar(
    "chamvi_infrastructure_failures", default=None
)
"""The failures of the tool call under way (one list per call, shared with the tasks it starts)."""


def is_infrastructure_failure(error: BaseException) -> bool:
    """Whether ``error``, or what it was raised from, is a transport failure of a store or server."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and not isinstance(current, ChamviError):
        if isinstance(current, TRANSPORT_FAILURES) or _http_failures(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return False


Method = Callable[P, Coroutine[Any, Any, T]]


def bookkeeping(what: str) -> Callable[[Method[P, T]], Method[P, T]]:
    """Makes a transport failure of the wrapped method an ``InfrastructureUnavailableError``.

    Args:
        what: what the method does, for the message (``asking the run for a recorded effect``).
    """

    def wrap(method: Method[P, T]) -> Method[P, T]:
        @functools.wraps(method)
        async def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await method(*args, **kwargs)
            except Exception as error:
                if not is_infrastructure_failure(error):
                    raise
                failure = InfrastructureUnavailableError(
                    f"{what} failed: {type(error).__name__}: {error} (the tool call is retried)"
                )
                failures = _FAILURES.get()
                if failures is not None:
                    failures.append(failure)
                raise failure from error

        return guarded

    return wrap


@contextlib.contextmanager
def watching() -> Iterator[list[InfrastructureUnavailableError]]:
    """Notes the infrastructure failures raised while the block runs, caught by the tool or not."""
    failures: list[InfrastructureUnavailableError] = []
    reset = _FAILURES.set(failures)
    try:
        yield failures
    finally:
        _FAILURES.reset(reset)
