"""chamvi's spans: started on the installed tracer provider, failed by error type, never by message."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

ERROR_TYPE = "error.type"

_tracer = trace.get_tracer("chamvi")
"""A proxy: spans go to whichever tracer provider is installed when they start (none: no-op)."""


def failed(span: Span, kind: str) -> None:
    """Marks ``span`` failed with ``kind`` (a chamvi error code or an exception's type)."""
    span.set_attribute(ERROR_TYPE, kind)
    span.set_status(StatusCode.ERROR)


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, AttributeValue],
    kind: SpanKind = SpanKind.INTERNAL,
    context: Context | None = None,
) -> Iterator[Span]:
    """A current span around the block, under ``context``'s span (default: the current one).

    An exception fails it by its code or type and propagates.

    The exception's message is not recorded: it may quote a tool's arguments or a model's answer,
    which stay out of spans unless asked for (see ``chamvi.telemetry._otel``).
    """
    with _tracer.start_as_current_span(
        name,
        context,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as error:
            failed(current, getattr(error, "code", type(error).__name__))
            raise
