"""The text the Temporal UI shows on a run's page: one glance, whatever the approval holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from chamvi._run_details import (
    BODY_MAX_CHARS,
    SUMMARY_MAX_CHARS,
    approval_summary,
    current_details,
    static_details,
)
from chamvi.models import ErrorInfo, Invoker, RunStatus, WaitPoint


def wait_point(**fields: object) -> WaitPoint:
    values: dict[str, object] = {
        "approval_id": "2:call-1:0",
        "title": "Refund 40 EUR?",
        "tool": "refund",
        "step": 2,
        "until": datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    }
    return WaitPoint.model_validate(values | fields)


def test_a_long_body_is_cut_and_every_line_stays_quoted() -> None:
    body = "first line\n" + "x" * (BODY_MAX_CHARS * 2)
    details = current_details(RunStatus.WAITING, run_id="run-a", steps=2, waiting=wait_point(body=body))
    quoted = next(line for line in details.split("\n\n") if line.startswith("> "))
    assert quoted.startswith("> first line\n> x") and quoted.endswith("…")
    assert len(quoted) < BODY_MAX_CHARS + 20


def test_a_multi_line_title_stays_on_its_line_and_the_deadline_reads_in_utc() -> None:
    until = datetime(2026, 12, 1, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    details = current_details(
        RunStatus.WAITING, run_id="run-a", steps=1, waiting=wait_point(title="Refund\n40 EUR?", until=until)
    )
    assert "**Waiting for approval:** Refund 40 EUR?" in details
    assert "**Deadline:** 2026-12-01 09:30:00 UTC" in details
    assert ">" not in details  # no body, no quote


def test_an_ended_run_shows_its_error_and_no_wait() -> None:
    details = current_details(
        RunStatus.FAILED, run_id="run-a", steps=3, error=ErrorInfo(code="timeout", message="took\ntoo long")
    )
    assert details == "**Status:** failed\n\n**Steps:** 3\n\n**Error:** `timeout`: took too long"


def test_static_details_name_what_is_known_and_leave_out_the_rest() -> None:
    details = static_details(agent="support", trigger="manual", channel=None, invoker=None, run_id="run-a")
    assert details == "**Agent:** `support`\n\n**Trigger:** manual\n\n**Show it:** `chamvi runs show run-a`"
    named = static_details(
        agent="support",
        trigger="http",
        channel="email",
        invoker=Invoker(id="u-1", kind="user"),
        run_id="run-a",
    )
    assert "**Channel:** `email`" in named and "**Invoker:** `u-1` (user)" in named


def test_the_timelines_line_for_an_approval_holds_its_question_on_one_short_line() -> None:
    assert approval_summary("0:c:0", "Refund\n40 EUR?") == "approval 0:c:0: Refund 40 EUR?"
    long = approval_summary("0:c:0", "y" * (SUMMARY_MAX_CHARS * 3))
    assert long.endswith("…") and len(long) < SUMMARY_MAX_CHARS + 20
