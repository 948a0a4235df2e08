"""What the Temporal UI shows on a run's own page: its status and, while it waits, the question.

Temporal keeps two texts for a workflow besides its history: a static summary and details given at
start (``describe`` returns them) and current details the workflow sets as it goes (the UI reads them
through the built-in ``__temporal_workflow_metadata`` query, which the SDK answers without running
workflow code). Both are Temporal markdown. Without them the UI shows a waiting run as RUNNING and the
approval's question only inside the ``run`` query's JSON.

Pure functions of the run's state: the workflow calls them (they add no command to the history).
"""

from __future__ import annotations

from datetime import UTC, datetime

from chamvi.models import ErrorInfo, Invoker, RunStatus, WaitPoint

SUMMARY_MAX_CHARS = 200
"""A question is cut here in the timeline's one line; the run's current details carry it whole."""
BODY_MAX_CHARS = 2_000
"""An approval's body is cut here on the workflow page: a glance; ``chamvi runs show`` has it all."""


def static_summary(agent: str, trigger: str) -> str:
    """The one line the Temporal UI lists the run under: its agent and what started it."""
    return f"{agent} ({trigger})"


def static_details(
    *, agent: str, trigger: str, channel: str | None, invoker: Invoker | None, run_id: str
) -> str:
    """What never changes about the run, shown on its page: who and what started it, and how to read it."""
    lines = [f"**Agent:** `{agent}`", f"**Trigger:** {trigger}"]
    if channel:
        lines.append(f"**Channel:** `{channel}`")
    if invoker is not None:
        lines.append(f"**Invoker:** {_who(invoker)}")
    lines.append(f"**Show it:** `chamvi runs show {run_id}`")
    return "\n\n".join(lines)


def current_details(
    status: RunStatus,
    *,
    run_id: str,
    steps: int,
    waiting: WaitPoint | None = None,
    error: ErrorInfo | None = None,
) -> str:
    """The run's status now, and while it waits for a person the approval's question and how to answer.

    Args:
        status: the run's status.
        run_id: the run's id, for the commands the text offers.
        steps: how many steps the run has taken.
        waiting: the approval the run waits on, if any.
        error: why the run failed or was cancelled, if it did.
    """
    lines = [f"**Status:** {status.value}", f"**Steps:** {steps}"]
    if waiting is not None:
        lines.append(f"**Waiting for approval:** {_one_line(waiting.title)}")
        if waiting.body:
            body = (
                waiting.body if len(waiting.body) <= BODY_MAX_CHARS else waiting.body[:BODY_MAX_CHARS] + "…"
            )
            lines.append("\n".join(f"> {line}" for line in body.splitlines()))
        lines.append(
            f"**Tool:** `{waiting.tool}` (step {waiting.step}) · **Approval id:** `{waiting.approval_id}` · "
            f"**Deadline:** {_utc(waiting.until)} (then denied)"
        )
        lines.append(
            f"**Answer:** `chamvi approve {run_id}` (or `--deny --reason ...`), or the approvals page `/ui`"
        )
    if error is not None:
        lines.append(f"**Error:** `{error.code}`: {_one_line(error.message)}")
    return "\n\n".join(lines)


def approval_summary(approval_id: str, title: str) -> str:
    """The one line the approval's timer shows in the UI's timeline: its id and its question."""
    question = _one_line(title)
    if len(question) > SUMMARY_MAX_CHARS:
        question = question[:SUMMARY_MAX_CHARS] + "…"
    return f"approval {approval_id}: {question}"


def _who(invoker: Invoker) -> str:
    named = f"{_one_line(invoker.name)} " if invoker.name else ""
    return f"{named}`{invoker.id}` ({invoker.kind})"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
