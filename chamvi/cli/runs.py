"""Runs: ``chamvi dispatch``, ``chamvi runs list`` / ``show`` / ``watch``, ``approve``, ``cancel``.

Every run operation goes through ``ChamviClient``; the same runs are visible in the Temporal UI
and the ``temporal`` CLI.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
from temporalio.service import RPCError

from chamvi.artifacts import Attachment, check_attachment_size
from chamvi.cli._common import POLL_SECONDS, json_option, run_with_client, temporal_options
from chamvi.cli._follow import Api, Printer, api_options, follow_run
from chamvi.cli._output import Spinner, artifact_lines, columns, dump, echo_err, short, when
from chamvi.client import AGENT_CHECK_TIMEOUT, ChamviClient
from chamvi.errors import ChamviError
from chamvi.models import (
    ApprovalDecision,
    Artifact,
    CallInProgress,
    Invoker,
    RunStatus,
    RunSummary,
    RunView,
    StepView,
)
from chamvi.run_events import RunEvent
from chamvi.settings import Settings

_PAYLOAD_EXAMPLE = """--payload '{"query": "shipping"}'"""


_SETTINGS_EXAMPLE = """--model-settings '{"temperature": 0.2}'"""


def _json_object(option: str, text: str, example: str) -> dict[str, Any]:
    """``text`` given to ``option`` as a JSON object, or what is wrong with it and an example."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise click.ClickException(f"{option} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise click.ClickException(f"{option} must be a JSON object, e.g. {example}: got {short(value, 40)}")
    return value


def _parse_model_settings(text: str | None) -> dict[str, Any] | None:
    """``--model-settings`` as a JSON object; the client checks its fields (and asks the worker)."""
    return None if text is None else _json_object("--model-settings", text, _SETTINGS_EXAMPLE)


def _parse_payload(text: str | None) -> dict[str, Any] | None:
    """The payload as a JSON object: agents (and the demo model) read it by field name."""
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    return _json_object("--payload", text, _PAYLOAD_EXAMPLE)


def _attachments(paths: tuple[Path, ...], limit: int) -> list[Attachment]:
    """The files of ``--attach``, each checked against the limit before it is read."""
    try:
        for path in paths:
            check_attachment_size(path.name, path.stat().st_size, limit)
        return [Attachment.from_path(path) for path in paths]
    except ChamviError as error:
        raise click.ClickException(error.message) from None


class _Progress(Spinner):
    """The run's status and step count; a hint when the run starts waiting for an approval."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.hinted: set[str] = set()

    def update(self, view: RunView) -> None:
        steps = len(view.steps)
        text = f"{view.status.value}, {steps} step{'' if steps == 1 else 's'}"
        if view.waiting is not None and view.waiting.approval_id not in self.hinted:
            self.hinted.add(view.waiting.approval_id)
            self.close()
            echo_err(
                f"waiting for approval: {view.waiting.title} "
                f"(answer with `chamvi approve {self.run_id}` or `--deny`)"
            )
        self.show(text)


async def _watch(chamvi: ChamviClient, run_id: str, progress: _Progress) -> RunView:
    settled = asyncio.ensure_future(chamvi.wait(run_id))
    try:
        while not settled.done():
            try:
                progress.update(await chamvi.get_run(run_id))
            except (ChamviError, RPCError):
                if settled.done():
                    break
                raise
            await asyncio.wait({settled}, timeout=POLL_SECONDS)
        return await settled
    finally:
        settled.cancel()
        progress.close()


def _outcome(view: RunView, as_json: bool) -> None:
    if as_json:
        click.echo(dump(view))
        if view.status != RunStatus.COMPLETED:
            raise click.exceptions.Exit(1)
        return
    if view.status == RunStatus.COMPLETED:
        output = view.output
        click.echo(output if isinstance(output, str) else dump(output))
        return
    if view.status == RunStatus.FAILED:
        error = view.error
        detail = f"{error.code}: {error.message}" if error is not None else "no error recorded"
        raise click.ClickException(f"run {view.run_id} failed: {detail}")
    raise click.ClickException(f"run {view.run_id} was {view.status.value}")


@click.command()
@click.argument("agent")
@click.option("--payload", metavar="JSON", help="The trigger payload as JSON ('-' reads it from stdin).")
@click.option("--channel", help="The channel the run came from.")
@click.option(
    "--channel-address",
    help="The address within the channel (a thread, an issue); --address is Temporal's, as everywhere.",
)
@click.option("--idempotency-key", help="A redelivery with the same key returns the existing run.")
@click.option("--concurrency-key", help="Runs sharing this key run one at a time, in dispatch order.")
@click.option(
    "--model-settings",
    metavar="JSON",
    help="This run's own model settings as a JSON object, e.g. '{\"temperature\": 0.2}': only those the "
    "agent lets a dispatch set (by default temperature, top_p, stop, seed), within its caps.",
)
@click.option(
    "--attach",
    "attach",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="FILE",
    help="A file the model gets with the first message (repeatable); stored as an artifact of the run.",
)
@click.option(
    "--wait", "wait_for_it", is_flag=True, help="Show progress until the run settles; print its outcome."
)
@click.option(
    "--follow",
    is_flag=True,
    help="Print the model's text as it is written, each step and approval, until the run ends.",
)
@json_option()
@temporal_options()
@api_options
def dispatch(
    agent: str,
    payload: str | None,
    channel: str | None,
    channel_address: str | None,
    idempotency_key: str | None,
    concurrency_key: str | None,
    model_settings: str | None,
    attach: tuple[Path, ...],
    wait_for_it: bool,
    follow: bool,
    as_json: bool,
    api: Api | None,
    settings: Settings,
) -> None:
    """Start a run of AGENT and print its id (with --wait: its outcome; non-zero exit unless it completes).

    A worker on the task queue is asked first whether its app serves AGENT, so an unknown agent is
    an error at once; with no worker up, the run is queued (and says so) until one starts.
    """
    value = _parse_payload(payload)
    run_settings = _parse_model_settings(model_settings)
    attachments = _attachments(attach, settings.attachment_max_bytes)
    state: dict[str, str] = {}
    printer = Printer("", as_json=as_json)

    async def go(chamvi: ChamviClient) -> RunView | RunEvent | None:
        if not await chamvi.agents.check(agent, channel=channel):
            echo_err(
                f"no worker answered on task queue {settings.task_queue!r} within "
                f"{AGENT_CHECK_TIMEOUT.total_seconds():g} s: the run is queued and starts when a worker "
                "is up (`chamvi dev` or `chamvi worker`)"
            )
        result = await chamvi.dispatch(
            agent,
            value,
            channel=channel,
            address=channel_address,
            idempotency_key=idempotency_key,
            concurrency_key=concurrency_key,
            attachments=attachments,
            model_settings=run_settings,
        )
        state["run_id"] = result.run_id
        if not result.created:
            echo_err(f"idempotency key seen before: this is the existing run {result.run_id}")
        if not as_json:
            click.echo(result.run_id)
        elif not wait_for_it:
            click.echo(dump({"run_id": result.run_id, "created": result.created}))
        if follow:
            printer.run_id = result.run_id
            return await follow_run(chamvi, result.run_id, api, printer)
        if not wait_for_it:
            return None
        return await _watch(chamvi, result.run_id, _Progress(result.run_id))

    try:
        view = run_with_client(settings, go, artifacts=bool(attachments))
    except KeyboardInterrupt:
        run_id = state.get("run_id")
        if run_id is None:
            raise
        echo_err(f"\nstopped watching; the run goes on: chamvi runs show {run_id}")
        raise click.exceptions.Exit(130) from None
    if isinstance(view, RunEvent):
        printer.outcome(view)
    elif view is not None:
        _outcome(view, as_json)


@click.group()
def runs() -> None:
    """List and inspect runs."""


def _table(rows: list[RunSummary]) -> list[str]:
    header = ("RUN", "AGENT", "STATUS", "CHANNEL", "STARTED")
    cells = [header] + [
        (r.run_id, r.agent or "-", r.status or "-", r.channel or "-", when(r.started_at)) for r in rows
    ]
    return columns(cells)


@runs.command("list")
@click.option("--agent", help="Only runs of this agent.")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]), help="Only runs in this status.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--channel", help="Only runs that came from this channel.")
@json_option()
@temporal_options()
def list_runs(
    agent: str | None, status: str | None, limit: int, channel: str | None, as_json: bool, settings: Settings
) -> None:
    """List recent runs, newest first (from search attributes: no worker needed)."""
    found = run_with_client(
        settings, lambda chamvi: chamvi.list_runs(agent=agent, status=status, limit=limit, channel=channel)
    )
    if as_json:
        click.echo(dump(found))
    elif not found:
        echo_err("no runs")
    else:
        for line in _table(found):
            click.echo(line)


@runs.command("idle")
@click.option("--agent", help="Only runs of this agent.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Give up after this long, with a non-zero exit [default: wait as long as it takes].",
)
@temporal_options()
def idle_runs(agent: str | None, timeout: float | None, settings: Settings) -> None:
    """Wait until no run (of AGENT) on the task queue is queued or running.

    A run waiting for an approval does not count. Runs are found through Temporal's visibility,
    which may lag behind a run started a moment ago by another process.
    """
    limit = timedelta(seconds=timeout) if timeout is not None else None
    run_with_client(settings, lambda chamvi: chamvi.idle(agent, timeout=limit))
    echo_err(f"no run of agent {agent!r} in progress" if agent else "no run in progress")


def _step_line(step: StepView) -> str:
    if step.kind == "llm":
        if step.tool_calls:
            what = "calls " + ", ".join(f"{c.name}({short(c.arguments, 60)})" for c in step.tool_calls)
        else:
            what = short(step.text or "")
    elif step.kind == "tool":
        result = f"error {step.error.code}: {step.error.message}" if step.error else short(step.output)
        what = f"{step.tool} -> {short(result)}"
    else:
        decision = step.decision
        what = f"approval {step.approval_id}" + (
            f": {'approved' if decision.approved else 'denied'}"
            + (f" ({decision.reason})" if decision.reason else "")
            if decision is not None
            else ": pending"
        )
    return f"  {step.index:>3}  {step.kind:<4}  {what}"


def _call_line(call: CallInProgress) -> str:
    """A call in progress: what it does, which attempt, since when, and why the last one failed."""
    limit = f" of {call.maximum_attempts}" if call.maximum_attempts else ""
    state = f"started {when(call.started_at)}" if call.state == "started" else call.state.replace("_", " ")
    what = call.doing or call.activity
    line = f"calling   {what} ({call.activity}, attempt {call.attempt}{limit}, {state})"
    if call.last_failure:
        line += f"\n          last attempt: {short(call.last_failure)}"
    return line


def _show(view: RunView, artifacts: list[Artifact]) -> list[str]:
    trigger = view.trigger
    origin = trigger.trigger + (f" via {trigger.channel}" if trigger.channel else "")
    origin += f" ({trigger.address})" if trigger.address else ""
    lines = [
        f"run       {view.run_id}",
        f"agent     {view.agent}"
        + (f" (runtime revision {view.agent_revision})" if view.agent_revision is not None else ""),
        f"status    {view.status.value}",
        f"trigger   {origin}",
        f"payload   {short(trigger.payload)}",
        f"created   {when(view.created_at)}",
    ]
    if view.ended_at is not None:
        lines.append(f"ended     {when(view.ended_at)}")
    if view.concurrency_key:
        lines.append(f"key       {view.concurrency_key}")
    lines.append(f"usage     {view.usage.input_tokens} in, {view.usage.output_tokens} out tokens")
    if view.taint is not None:
        lines.append(f"tainted   since {when(view.taint.at)} by {view.taint.source}")
    if view.waiting is not None:
        wait = view.waiting
        lines.append(
            f"waiting   {wait.title} "
            f"(approval {wait.approval_id}, tool {wait.tool}, until {when(wait.until)})"
        )
        if wait.body:
            lines.append(f"          {short(wait.body)}")
        if wait.input is not None:
            lines.append(f"          input: {json.dumps(wait.input, sort_keys=True)}")
        lines.append(f"          answer: chamvi approve {view.run_id}  (or --deny --reason ...)")
    if view.steps:
        lines.append("steps")
        lines.extend(_step_line(step) for step in view.steps)
    lines.extend(_call_line(call) for call in view.calls)
    if artifacts:
        lines.append("artifacts (chamvi artifacts get ID -o FILE)")
        lines.extend(artifact_lines(artifacts))
    if view.output is not None:
        output = view.output if isinstance(view.output, str) else dump(view.output)
        lines.append("output")
        lines.extend(f"  {line}" for line in output.splitlines())
    if view.error is not None:
        lines.append(f"error     {view.error.code}: {view.error.message}")
        lines.extend(f"  {issue.where}: {issue.message} ({issue.code})" for issue in view.error.issues or ())
    return lines


@runs.command("show")
@click.argument("run_id", metavar="RUN")
@json_option()
@temporal_options()
def show_run(run_id: str, as_json: bool, settings: Settings) -> None:
    """Show a run: status, steps, approval it waits on, artifacts, output or error."""

    async def read(chamvi: ChamviClient) -> tuple[RunView, list[Artifact]]:
        view = await chamvi.get_run(run_id)
        return view, await chamvi.artifacts.list(run_id) if chamvi.artifacts else []

    view, artifacts = run_with_client(settings, read, artifacts=True)
    if as_json:
        click.echo(dump(view))
    else:
        for line in _show(view, artifacts):
            click.echo(line)


@runs.command("watch")
@click.argument("run_id", metavar="RUN")
@json_option("Print each event as one JSON line.")
@temporal_options()
@api_options
def watch_run(run_id: str, as_json: bool, api: Api | None, settings: Settings) -> None:
    """Follow RUN until it ends: the model's text as it is written, each step and approval.

    Exits 0 when the run completes, 1 when it fails or is cancelled. Ctrl-C stops watching only.
    """
    printer = Printer(run_id, as_json=as_json)
    try:
        final = run_with_client(settings, lambda chamvi: follow_run(chamvi, run_id, api, printer))
    except KeyboardInterrupt:
        echo_err(f"\nstopped watching; the run goes on: chamvi runs show {run_id}")
        raise click.exceptions.Exit(130) from None
    if final is not None:
        printer.outcome(final)


def _approver() -> Invoker:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "unknown"
    return Invoker(id=user, kind="cli", name=user)


@click.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option("--deny", is_flag=True, help="Deny instead of approve.")
@click.option("--reason", help="Why; the tool and the run's steps see it.")
@click.option("--approval-id", help="The approval to answer [default: the one the run waits on].")
@click.option(
    "--token",
    metavar="TOKEN",
    help="Answer the approval this token from a channel's request names, instead of RUN's "
    "('-' reads it from stdin, out of the shell's history). Checked with CHAMVI_APPROVAL_SECRET, "
    "else the data folder's approval-secret.",
)
@temporal_options()
def approve(
    run_id: str | None,
    deny: bool,
    reason: str | None,
    approval_id: str | None,
    token: str | None,
    settings: Settings,
) -> None:
    """Approve (or --deny) what RUN waits on, or the approval a --token names."""
    if token is not None:
        if run_id is not None or approval_id is not None:
            raise click.UsageError("--token names its run and approval: pass no RUN and no --approval-id")
        presented = sys.stdin.read().strip() if token == "-" else token
        decision = ApprovalDecision(approved=not deny, reason=reason, approver=_approver())
        resumed = run_with_client(
            settings, lambda chamvi: chamvi.approvals.resume(presented, decision), approval_tokens=True
        )
        click.echo(f"{'denied' if deny else 'approved'} {resumed.approval_id} on run {resumed.run_id}")
        return
    if run_id is None:
        raise click.UsageError("name the RUN to answer, or pass --token from an approval request")
    answering = run_id
    answered = run_with_client(
        settings,
        lambda chamvi: chamvi.approvals.approve(
            answering, approved=not deny, reason=reason, approval_id=approval_id, approver=_approver()
        ),
    )
    click.echo(f"{'denied' if deny else 'approved'} {answered} on run {run_id}")


@click.command()
@click.argument("run_id", metavar="RUN")
@temporal_options()
def cancel(run_id: str, settings: Settings) -> None:
    """Cancel RUN; it settles as cancelled."""
    run_with_client(settings, lambda chamvi: chamvi.cancel(run_id))
    click.echo(f"cancellation requested for run {run_id}")
