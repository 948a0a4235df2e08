"""The ``chamvi`` command line: the local stack, workers, and runs (dispatch, list, show, approve, cancel).

Every run operation goes through ``ChamviClient``; the same runs are visible in the Temporal UI
and the ``temporal`` CLI. Failures a person can fix are one line and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.envconfig import ClientConfig
from temporalio.exceptions import ActivityError, ChildWorkflowError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError
from temporalio.service import RPCError, RPCStatusCode

from activities.knowledge import request_sync
from chamvi import constants as c
from chamvi.app import App
from chamvi.client import ChamviClient
from chamvi.constants import TASK_QUEUE
from chamvi.dev import (
    DEFAULT_PORT,
    DevServer,
    DevServerConfig,
    boot_knowledge,
    check_knowledge,
    close_store,
    log_to_terminal,
    open_store,
    qdrant_location,
    run_worker,
    serve,
    stop_on_signals,
)
from chamvi.errors import ChamviError, RunNotFoundError
from chamvi.knowledge import KnowledgeCollection, Source
from chamvi.knowledge.search import MAX_CHARS, MAX_TOP_K
from chamvi.knowledge.state import CollectionMeta, CollectionState, PassStats, SearchRequest
from chamvi.models import Invoker, RunStatus, RunSummary, RunView, StepView
from chamvi.runtime import build_worker, connect, load_app
from chamvi.settings import DEFAULT_APP, Settings

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

POLL_SECONDS = 0.5
_SPINNER = "|/-\\"


def _echo_err(message: str) -> None:
    click.echo(message, err=True)


def _dump(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(value, indent=2, ensure_ascii=False)


# -- connection ---------------------------------------------------------------------------------------


def temporal_options(address_flags: Sequence[str] = ("--address", "--temporal-address")) -> Callable[[F], F]:
    """``--address``, ``--namespace``, ``--task-queue``, read from the same env vars as Temporal's tools."""

    def decorate(function: F) -> F:
        function = click.option(
            "--task-queue",
            envvar="CHAMVI_TASK_QUEUE",
            default=TASK_QUEUE,
            show_default=True,
            show_envvar=True,
            help="Task queue the chamvi workers poll.",
        )(function)
        function = click.option(
            "--namespace",
            envvar="TEMPORAL_NAMESPACE",
            show_envvar=True,
            help="Temporal namespace [default: Temporal's profile, else 'default'].",
        )(function)
        function = click.option(
            *address_flags,
            "temporal_address",
            envvar="TEMPORAL_ADDRESS",
            show_envvar=True,
            metavar="HOST:PORT",
            help="Temporal frontend [default: Temporal's profile, else localhost:7233].",
        )(function)
        return function

    return decorate


def app_option(function: F) -> F:
    return click.option(
        "--app",
        "app_ref",
        envvar="CHAMVI_APP",
        default=DEFAULT_APP,
        show_default=True,
        show_envvar=True,
        metavar="MODULE:ATTR",
        help="The chamvi App to serve.",
    )(function)


def _settings(
    temporal_address: str | None, namespace: str | None, task_queue: str | None, **extra: Any
) -> Settings:
    return Settings.from_env().with_overrides(
        temporal_address=temporal_address, temporal_namespace=namespace, task_queue=task_queue, **extra
    )


def _target(settings: Settings) -> str:
    if settings.temporal_address:
        return settings.temporal_address
    try:
        return str(ClientConfig.load_client_connect_config().get("target_host") or "localhost:7233")
    except Exception:  # a broken profile file: runtime.connect reports it
        return "localhost:7233"


def _unreachable(settings: Settings) -> click.ClickException:
    return click.ClickException(
        f"cannot reach Temporal at {_target(settings)}: start it with `chamvi dev` or set TEMPORAL_ADDRESS"
    )


async def _connect(settings: Settings) -> Client:
    try:
        return await connect(settings)
    except RuntimeError as error:
        if "connect" in str(error).lower():
            raise _unreachable(settings) from None
        raise


def _run(settings: Settings, operation: Callable[[ChamviClient], Awaitable[T]]) -> T:
    """Connects, runs ``operation`` with a ChamviClient, and turns failures into one-line errors."""

    async def go() -> T:
        client = await _connect(settings)
        return await operation(ChamviClient(client, task_queue=settings.task_queue))

    try:
        return asyncio.run(go())
    except RunNotFoundError as error:
        namespace = settings.temporal_namespace or "default"
        raise click.ClickException(
            f"{error.message} in namespace {namespace!r} at {_target(settings)}"
        ) from None
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    except RPCError as error:
        if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise _unreachable(settings) from None
        raise click.ClickException(f"Temporal at {_target(settings)} refused: {error.message}") from None


def _load_app(ref: str) -> App:
    try:
        return load_app(ref)
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    except Exception as error:  # the user's module failed while importing
        raise click.ClickException(f"importing app {ref!r} raised {type(error).__name__}: {error}") from None


# -- the group ----------------------------------------------------------------------------------------


@click.group(
    name="chamvi", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(package_name="chamvi-temporal", prog_name="chamvi")
def cli() -> None:
    """Durable AI agents on Temporal.

    Start here: `chamvi dev` runs a local Temporal server and a worker for the example app;
    `chamvi dispatch support --payload '{...}'` starts a run.
    """


def main(argv: Sequence[str] | None = None) -> None:
    """The console script; ``worker.py`` calls ``main(["worker", ...])``."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="chamvi")
        code = 0
    except SystemExit as exiting:
        code = exiting.code if isinstance(exiting.code, int) else (0 if exiting.code is None else 1)
    # The SDK's Rust threads can abort CPython's finalisation at the end of a short-lived client
    # process ("PyGILState_Release: thread state must be current", temporalio/sdk-python#300):
    # everything is done and flushed here, so leave without finalising.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


# -- processes ----------------------------------------------------------------------------------------


@cli.command()
@app_option
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CHAMVI_DATA",
    default=Path(".chamvi"),
    show_default=True,
    show_envvar=True,
    help="Folder for all local state: the Temporal database and log, the example's outbox.",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="gRPC port."
)
@click.option(
    "--ui-port", type=click.IntRange(1, 65535), default=None, help="Web UI port [default: --port + 1000]."
)
@click.option(
    "--namespace", envvar="TEMPORAL_NAMESPACE", default="default", show_default=True, show_envvar=True
)
@click.option(
    "--task-queue", envvar="CHAMVI_TASK_QUEUE", default=TASK_QUEUE, show_default=True, show_envvar=True
)
def dev(app_ref: str, data: Path, port: int, ui_port: int | None, namespace: str, task_queue: str) -> None:
    """Run a local Temporal dev server (SQLite in DATA, Web UI) and a worker for the app.

    Ctrl-C (or SIGTERM) stops the worker, then the server; nothing is left running.
    """
    data = data.resolve()
    # the app runs in this process and keeps its files (the example's outbox) in the same folder
    os.environ["CHAMVI_DATA"] = str(data)
    app = _load_app(app_ref)
    config = DevServerConfig(data=data, port=port, ui_port=ui_port, namespace=namespace)
    settings = _settings(config.address, namespace, task_queue, app=app_ref, data=data)
    server = DevServer(config)
    log_to_terminal()
    try:
        asyncio.run(serve(server, settings, app, echo=_echo_err))
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    finally:
        server.stop()
    _echo_err("stopped")


@cli.command()
@app_option
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CHAMVI_DATA",
    default=Path(".chamvi"),
    show_default=True,
    show_envvar=True,
    help="Folder for local state: Qdrant in local mode (unless QDRANT_URL), the example's outbox.",
)
@temporal_options()
def worker(
    app_ref: str, data: Path, temporal_address: str | None, namespace: str | None, task_queue: str
) -> None:
    """Run a worker for the app until SIGINT/SIGTERM; run as many replicas as you like.

    Several workers need a Qdrant server (QDRANT_URL): Qdrant's local mode allows one process per folder.
    """
    data = data.resolve()
    os.environ["CHAMVI_DATA"] = str(data)
    settings = _settings(temporal_address, namespace, task_queue, app=app_ref, data=data)
    app = _load_app(app_ref)
    log_to_terminal()

    async def go() -> None:
        stop = asyncio.Event()
        with stop_on_signals(stop):
            store = open_store(settings)
            try:
                await check_knowledge(app, store, settings)
                client = await _connect(settings)
                worker = build_worker(client, app, task_queue=settings.task_queue, store=store)
                _echo_err(
                    f"worker for {app_ref} (agents: {', '.join(app.agents) or 'none'}) on task queue "
                    f"{settings.task_queue!r} at {_target(settings)}, knowledge in "
                    f"{qdrant_location(settings)}. Ctrl-C to stop."
                )
                knowledge = boot_knowledge(client, app, store, settings.task_queue, _echo_err)
                await run_worker(worker, stop, _echo_err, knowledge)
            finally:
                await close_store(store)

    try:
        asyncio.run(go())
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    except RPCError as error:
        raise click.ClickException(f"Temporal at {_target(settings)} refused: {error.message}") from None
    _echo_err("stopped")


def _source_line(source: Source) -> str:
    path = getattr(source, "path", None)
    if isinstance(path, Path):
        with contextlib.suppress(ValueError):
            path = path.relative_to(Path.cwd())
        return f"{source.kind} {path}"
    return source.kind


def _collection_line(collection: KnowledgeCollection) -> str:
    sources = ", ".join(_source_line(source) for source in collection.sources)
    extra = f", resync every {_duration(collection.resync)}" if collection.resync is not None else ""
    trust = "" if collection.is_trusted else ", untrusted (a search taints the run)"
    return f"  collection {collection.name}: model {collection.model}, sources: {sources}{extra}{trust}"


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _needs_openai_key(ref: str) -> bool:
    return ref.startswith("openai/") and not (
        os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
    )


@cli.command()
@app_option
def check(app_ref: str) -> None:
    """Load the app and report problems, without starting anything.

    Loading checks the agents (models, tools, channels) and the knowledge collections (names
    declared once, embedding models that resolve, folder() paths that are directories, sources'
    own check()).
    """
    app = _load_app(app_ref)
    problems: list[str] = []
    warnings: list[str] = []
    lines: list[str] = []
    for name, agent in app.agents.items():
        try:
            ref, _ = app.model_for(agent)
            app.spec(name)
        except Exception as error:
            problems.append(f"agent {name!r}: {error}")
            continue
        if _needs_openai_key(ref):
            warnings.append(
                f"agent {name!r} uses {ref!r} but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set"
            )
        tools = ", ".join(
            f"{t.name}{' (effect)' if t.effect is not None else ''}" for t in agent.tools.values()
        )
        lines.append(f"  agent {name}: model {ref}, tools: {tools or 'none'}")
    if not app.agents:
        problems.append("the app has no agents")
    for collection in app.collections.values():
        if _needs_openai_key(collection.model):
            warnings.append(
                f"collection {collection.name!r} uses {collection.model!r} but neither OPENAI_API_KEY nor "
                "OPENAI_BASE_URL is set"
            )
        lines.append(_collection_line(collection))
    for warning in warnings:
        _echo_err(f"warning: {warning}")
    for problem in problems:
        _echo_err(f"problem: {problem}")
    if problems:
        raise click.ClickException(f"{app_ref}: {len(problems)} problem(s)")
    click.echo(
        f"{app_ref}: ok, {len(app.agents)} agent(s), {len(app.collections)} collection(s), "
        f"channels: {', '.join(app.channels) or 'none'}"
    )
    for line in lines:
        click.echo(line)


# -- runs ---------------------------------------------------------------------------------------------


def _parse_payload(text: str | None) -> Any:
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise click.ClickException(f"--payload is not valid JSON: {error}") from None


class _Progress:
    """A spinner with the run's status and step count on a terminal; one line per change elsewhere."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.tty = sys.stderr.isatty()
        self.frames = itertools.cycle(_SPINNER)
        self.last = ""
        self.hinted: set[str] = set()

    def update(self, view: RunView) -> None:
        steps = len(view.steps)
        text = f"{view.status.value}, {steps} step{'' if steps == 1 else 's'}"
        if view.waiting is not None and view.waiting.approval_id not in self.hinted:
            self.hinted.add(view.waiting.approval_id)
            self._clear()
            _echo_err(
                f"waiting for approval: {view.waiting.title} "
                f"(answer with `chamvi approve {self.run_id}` or `--deny`)"
            )
        if self.tty:
            click.echo(f"\r{next(self.frames)} {self.run_id}: {text}\033[K", err=True, nl=False)
        elif text != self.last:
            _echo_err(f"{self.run_id}: {text}")
        self.last = text

    def _clear(self) -> None:
        if self.tty:
            click.echo("\r\033[K", err=True, nl=False)

    def close(self) -> None:
        self._clear()


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
        click.echo(_dump(view))
        if view.status != RunStatus.COMPLETED:
            raise click.exceptions.Exit(1)
        return
    if view.status == RunStatus.COMPLETED:
        output = view.output
        click.echo(output if isinstance(output, str) else _dump(output))
        return
    if view.status == RunStatus.FAILED:
        error = view.error
        detail = f"{error.code}: {error.message}" if error is not None else "no error recorded"
        raise click.ClickException(f"run {view.run_id} failed: {detail}")
    raise click.ClickException(f"run {view.run_id} was {view.status.value}")


@cli.command()
@click.argument("agent")
@click.option("--payload", metavar="JSON", help="The trigger payload as JSON ('-' reads it from stdin).")
@click.option("--channel", help="The channel the run came from.")
@click.option("--address", "channel_address", help="The address within the channel (a thread, an issue).")
@click.option("--idempotency-key", help="A redelivery with the same key returns the existing run.")
@click.option("--concurrency-key", help="Runs sharing this key run one at a time, in dispatch order.")
@click.option(
    "--wait", "wait_for_it", is_flag=True, help="Show progress until the run settles; print its outcome."
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@temporal_options(address_flags=("--temporal-address",))
def dispatch(
    agent: str,
    payload: str | None,
    channel: str | None,
    channel_address: str | None,
    idempotency_key: str | None,
    concurrency_key: str | None,
    wait_for_it: bool,
    as_json: bool,
    temporal_address: str | None,
    namespace: str | None,
    task_queue: str,
) -> None:
    """Start a run of AGENT and print its id (with --wait: its outcome; non-zero exit unless it completes)."""
    value = _parse_payload(payload)
    settings = _settings(temporal_address, namespace, task_queue)
    state: dict[str, str] = {}

    async def go(chamvi: ChamviClient) -> RunView | None:
        result = await chamvi.dispatch(
            agent,
            value,
            channel=channel,
            address=channel_address,
            idempotency_key=idempotency_key,
            concurrency_key=concurrency_key,
        )
        state["run_id"] = result.run_id
        if not result.created:
            _echo_err(f"idempotency key seen before: this is the existing run {result.run_id}")
        if not as_json:
            click.echo(result.run_id)
        elif not wait_for_it:
            click.echo(_dump({"run_id": result.run_id, "created": result.created}))
        if not wait_for_it:
            return None
        return await _watch(chamvi, result.run_id, _Progress(result.run_id))

    try:
        view = _run(settings, go)
    except KeyboardInterrupt:
        run_id = state.get("run_id")
        if run_id is None:
            raise
        _echo_err(f"\nstopped watching; the run goes on: chamvi runs show {run_id}")
        raise click.exceptions.Exit(130) from None
    if view is not None:
        _outcome(view, as_json)


@cli.group()
def runs() -> None:
    """List and inspect runs."""


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "-"


def _table(rows: list[RunSummary]) -> list[str]:
    header = ("RUN", "AGENT", "STATUS", "CHANNEL", "STARTED")
    cells = [header] + [
        (r.run_id, r.agent or "-", r.status or "-", r.channel or "-", _when(r.started_at)) for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]


@runs.command("list")
@click.option("--agent", help="Only runs of this agent.")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]), help="Only runs in this status.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@temporal_options()
def list_runs(
    agent: str | None,
    status: str | None,
    limit: int,
    as_json: bool,
    temporal_address: str | None,
    namespace: str | None,
    task_queue: str,
) -> None:
    """List recent runs, newest first (from search attributes: no worker needed)."""
    settings = _settings(temporal_address, namespace, task_queue)
    found = _run(settings, lambda chamvi: chamvi.list_runs(agent=agent, status=status, limit=limit))
    if as_json:
        click.echo(_dump(found))
    elif not found:
        _echo_err("no runs")
    else:
        for line in _table(found):
            click.echo(line)


def _short(value: Any, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _step_line(step: StepView) -> str:
    if step.kind == "llm":
        if step.tool_calls:
            what = "calls " + ", ".join(f"{c.name}({_short(c.arguments, 60)})" for c in step.tool_calls)
        else:
            what = _short(step.text or "")
    elif step.kind == "tool":
        result = f"error {step.error.code}: {step.error.message}" if step.error else _short(step.output)
        what = f"{step.tool} -> {_short(result)}"
    else:
        decision = step.decision
        what = f"approval {step.approval_id}" + (
            f": {'approved' if decision.approved else 'denied'}"
            + (f" ({decision.reason})" if decision.reason else "")
            if decision is not None
            else ": pending"
        )
    return f"  {step.index:>3}  {step.kind:<4}  {what}"


def _show(view: RunView) -> list[str]:
    trigger = view.trigger
    origin = trigger.trigger + (f" via {trigger.channel}" if trigger.channel else "")
    origin += f" ({trigger.address})" if trigger.address else ""
    lines = [
        f"run       {view.run_id}",
        f"agent     {view.agent}",
        f"status    {view.status.value}",
        f"trigger   {origin}",
        f"payload   {_short(trigger.payload)}",
        f"created   {_when(view.created_at)}",
    ]
    if view.ended_at is not None:
        lines.append(f"ended     {_when(view.ended_at)}")
    if view.concurrency_key:
        lines.append(f"key       {view.concurrency_key}")
    lines.append(f"usage     {view.usage.input_tokens} in, {view.usage.output_tokens} out tokens")
    if view.taint is not None:
        lines.append(f"tainted   since {_when(view.taint.at)} by {view.taint.source}")
    if view.waiting is not None:
        wait = view.waiting
        lines.append(
            f"waiting   {wait.title} "
            f"(approval {wait.approval_id}, tool {wait.tool}, until {_when(wait.until)})"
        )
        if wait.body:
            lines.append(f"          {_short(wait.body)}")
        lines.append(f"          answer: chamvi approve {view.run_id}  (or --deny --reason ...)")
    if view.steps:
        lines.append("steps")
        lines.extend(_step_line(step) for step in view.steps)
    if view.output is not None:
        output = view.output if isinstance(view.output, str) else _dump(view.output)
        lines.append("output")
        lines.extend(f"  {line}" for line in output.splitlines())
    if view.error is not None:
        lines.append(f"error     {view.error.code}: {view.error.message}")
    return lines


@runs.command("show")
@click.argument("run_id", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@temporal_options()
def show_run(
    run_id: str, as_json: bool, temporal_address: str | None, namespace: str | None, task_queue: str
) -> None:
    """Show a run: status, steps, approval it waits on, output or error."""
    settings = _settings(temporal_address, namespace, task_queue)
    view = _run(settings, lambda chamvi: chamvi.get_run(run_id))
    if as_json:
        click.echo(_dump(view))
    else:
        for line in _show(view):
            click.echo(line)


def _approver() -> Invoker:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "unknown"
    return Invoker(id=user, kind="cli", name=user)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--deny", is_flag=True, help="Deny instead of approve.")
@click.option("--reason", help="Why; the tool and the run's steps see it.")
@click.option("--approval-id", help="The approval to answer [default: the one the run waits on].")
@temporal_options()
def approve(
    run_id: str,
    deny: bool,
    reason: str | None,
    approval_id: str | None,
    temporal_address: str | None,
    namespace: str | None,
    task_queue: str,
) -> None:
    """Approve (or --deny) what RUN waits on."""
    settings = _settings(temporal_address, namespace, task_queue)
    answered = _run(
        settings,
        lambda chamvi: chamvi.approve(
            run_id, approved=not deny, reason=reason, approval_id=approval_id, approver=_approver()
        ),
    )
    click.echo(f"{'denied' if deny else 'approved'} {answered} on run {run_id}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@temporal_options()
def cancel(run_id: str, temporal_address: str | None, namespace: str | None, task_queue: str) -> None:
    """Cancel RUN; it settles as cancelled."""
    settings = _settings(temporal_address, namespace, task_queue)
    _run(settings, lambda chamvi: chamvi.cancel(run_id))
    click.echo(f"cancellation requested for run {run_id}")


# -- knowledge ----------------------------------------------------------------------------------------

KNOWLEDGE_QUERY_TIMEOUT = timedelta(seconds=5)
EXCERPT_CHARS = 240


@cli.group()
def knowledge() -> None:
    """Knowledge collections: list them, ask for a pass, search one.

    Each collection is a `KnowledgeCollection` workflow (`knowledge:<name>`) that a worker starts
    when it boots; these commands talk to Temporal only, the worker holds Qdrant.
    """


def _no_worker(settings: Settings) -> click.ClickException:
    return click.ClickException(
        f"no worker answers on task queue {settings.task_queue!r}: start one with `chamvi dev` or "
        "`chamvi worker` (with the same --task-queue)"
    )


# what a query to a workflow whose worker is down ends with: the server knows no poller, or waits
_NO_WORKER = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.CANCELLED)


async def _collection_names(client: Client, task_queue: str) -> list[str]:
    query = (
        f'WorkflowType = "{c.KNOWLEDGE_COLLECTION_WORKFLOW}" AND ExecutionStatus = "Running" '
        f'AND TaskQueue = "{task_queue}"'
    )
    ids = {execution.id async for execution in client.list_workflows(query)}
    return sorted(i.removeprefix(c.KNOWLEDGE_ID_PREFIX) for i in ids)


async def _collection_state(client: Client, settings: Settings, name: str) -> CollectionState:
    handle = client.get_workflow_handle(c.KNOWLEDGE_ID_PREFIX + name)
    try:
        state: CollectionState = await handle.query(
            c.QUERY_KNOWLEDGE_STATE, result_type=CollectionState, rpc_timeout=KNOWLEDGE_QUERY_TIMEOUT
        )
    except RPCError as error:
        if error.status in _NO_WORKER:
            raise _no_worker(settings) from None
        raise
    return state


async def _require_collection(client: Client, settings: Settings, name: str) -> None:
    """Fails with one line naming the known collections when ``knowledge:<name>`` is not running."""
    try:
        description = await client.get_workflow_handle(c.KNOWLEDGE_ID_PREFIX + name).describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            return
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
    known = await _collection_names(client, settings.task_queue)
    if known:
        raise click.ClickException(
            f"unknown collection {name!r}: known collections are {', '.join(repr(k) for k in known)}"
        )
    raise click.ClickException(
        f"unknown collection {name!r}: no collection runs on task queue {settings.task_queue!r} yet "
        "(a worker starts the app's collections when it boots)"
    )


def _knowledge_run(settings: Settings, operation: Callable[[Client], Awaitable[T]]) -> T:
    return _run(settings, lambda chamvi: operation(chamvi.client))


def _collection_row(state: CollectionState) -> dict[str, Any]:
    """One collection as ``knowledge list --json`` prints it; before the first pass ends, nothing is known."""
    meta = state.meta or CollectionMeta(name=state.name)
    row: dict[str, Any] = {
        "name": state.name,
        "status": meta.status.value,
        "generation": meta.generation,
        "model": meta.model,
        "documents": meta.documents,
        "passages": meta.passages,
        "last_pass": meta.last_pass.isoformat() if meta.last_pass else None,
        "running": state.running,
        "queued": state.queued,
        "passes": state.passes,
        "error": state.error,
        "next_attempt": state.next_attempt.isoformat() if state.next_attempt else None,
    }
    if meta.building is not None:
        row["building"] = {"generation": meta.building, "model": meta.building_model}
    if meta.last_stats is not None:
        row["last_stats"] = meta.last_stats.model_dump(mode="json")
    return row


def _activity(state: CollectionState) -> str:
    if state.running:
        return "running" + (", 1 queued" if state.queued else "")
    if state.next_attempt is not None:
        return f"retry at {_when(state.next_attempt)}"
    return "queued" if state.queued else "idle"


def _collections_table(states: list[CollectionState]) -> list[str]:
    header = ("NAME", "STATUS", "GEN", "MODEL", "DOCS", "PASSAGES", "LAST PASS", "ACTIVITY")
    cells = [header]
    for state in states:
        meta = state.meta or CollectionMeta(name=state.name)
        generation = "-" if meta.generation is None else str(meta.generation)
        if meta.building is not None:
            generation += f" (g{meta.building} building)"
        cells.append(
            (
                state.name,
                meta.status.value,
                generation,
                meta.model or "-",
                str(meta.documents),
                str(meta.passages),
                _when(meta.last_pass),
                _activity(state),
            )
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    lines.extend(f"{s.name}: error: {_short(s.error, 300)}" for s in states if s.error)
    return lines


@knowledge.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@temporal_options()
def list_collections(
    as_json: bool, temporal_address: str | None, namespace: str | None, task_queue: str
) -> None:
    """List the collections: status, generation, model, documents, passages, last pass, errors."""
    settings = _settings(temporal_address, namespace, task_queue)

    async def go(client: Client) -> list[CollectionState]:
        names = await _collection_names(client, settings.task_queue)
        return list(await asyncio.gather(*(_collection_state(client, settings, n) for n in names)))

    states = _knowledge_run(settings, go)
    if as_json:
        click.echo(_dump([_collection_row(state) for state in states]))
    elif not states:
        _echo_err(
            f"no collections on task queue {settings.task_queue!r} "
            "(a worker starts the app's collections when it boots)"
        )
    else:
        for line in _collections_table(states):
            click.echo(line)


def _stats_line(stats: PassStats) -> str:
    text = (
        f"{stats.read} read, {stats.unchanged} unchanged, {stats.embedded} embedded "
        f"({stats.passages} passages), {stats.deleted} deleted, {stats.skipped} skipped, "
        f"{stats.failed} failed, {stats.embedding_calls} embedding call(s)"
    )
    if stats.incomplete:
        text += f"; incomplete read: {'; '.join(stats.incomplete)}"
    return text


async def _pass_progress(client: Client, name: str) -> PassStats | None:
    """The counts the running pass last reported (its activity heartbeats them)."""
    with contextlib.suppress(Exception):
        description = await client.get_workflow_handle(c.KNOWLEDGE_ID_PREFIX + name).describe()
        for pending in description.raw_description.pending_activities:
            if pending.activity_type.name == c.ACTIVITY_KNOWLEDGE_PASS and pending.heartbeat_details.payloads:
                details = await client.data_converter.decode(pending.heartbeat_details.payloads, [PassStats])
                return details[0] if isinstance(details[0], PassStats) else None
    return None


class _PassWatch:
    """Knows which pass answers a sync request, from the collection's pass counter and flags.

    A request that finds a pass running gets the pass after it; one that finds the collection
    idle gets the next one; one already taken up (not queued, running) gets the running one.
    """

    def __init__(self, before: CollectionState | None) -> None:
        self.before = before
        self.target: int | None = None

    def done(self, state: CollectionState) -> bool:
        if self.target is None:
            if state.queued:
                self.target = state.passes + (2 if state.running else 1)
            elif state.running:
                self.target = state.passes + 1
            elif self.before is not None and state.passes > self.before.passes:
                return True  # the requested pass has already finished
            else:
                self.target = state.passes + 1
        return state.passes >= self.target and not state.running


class _SyncProgress:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tty = sys.stderr.isatty()
        self.frames = itertools.cycle(_SPINNER)
        self.last = ""

    def update(self, state: CollectionState, stats: PassStats | None) -> None:
        if state.running:
            text = "pass running" + (
                f": {stats.read} read, {stats.embedded} embedded ({stats.passages} passages)"
                if stats is not None and stats.read
                else ""
            )
        elif state.next_attempt is not None:
            text = f"waiting for the retry at {_when(state.next_attempt)} after: {_short(state.error, 120)}"
        else:
            text = "pass queued"
        if self.tty:
            click.echo(f"\r{next(self.frames)} {self.name}: {text}\033[K", err=True, nl=False)
        elif text != self.last:
            _echo_err(f"{self.name}: {text}")
        self.last = text

    def close(self) -> None:
        if self.tty:
            click.echo("\r\033[K", err=True, nl=False)


@knowledge.command("sync")
@click.argument("name")
@click.option(
    "--wait",
    "wait_for_it",
    is_flag=True,
    help="Show progress until the requested pass ends; print its counts.",
)
@click.option("--json", "as_json", is_flag=True, help="With --wait: print the collection as JSON.")
@temporal_options()
def sync_collection(
    name: str,
    wait_for_it: bool,
    as_json: bool,
    temporal_address: str | None,
    namespace: str | None,
    task_queue: str,
) -> None:
    """Ask collection NAME for a pass now (during a pass: exactly one more after it)."""
    settings = _settings(temporal_address, namespace, task_queue)

    async def go(client: Client) -> CollectionState | None:
        await _require_collection(client, settings, name)
        before = await _collection_state(client, settings, name) if wait_for_it else None
        await request_sync(client, settings.task_queue, name)
        if not wait_for_it:
            return None
        watch = _PassWatch(before)
        progress = _SyncProgress(name)
        try:
            while True:
                state = await _collection_state(client, settings, name)
                if watch.done(state):
                    return state
                stats = await _pass_progress(client, name) if state.running else None
                progress.update(state, stats)
                await asyncio.sleep(POLL_SECONDS)
        finally:
            progress.close()

    try:
        state = _knowledge_run(settings, go)
    except KeyboardInterrupt:
        _echo_err(f"\nstopped watching; the pass goes on: chamvi knowledge list (collection {name!r})")
        raise click.exceptions.Exit(130) from None
    if state is None:
        click.echo(f"sync requested for {name!r}")
        return
    if as_json:
        click.echo(_dump(_collection_row(state)))
    elif state.error is None:
        meta = state.meta
        if meta is not None:
            click.echo(
                f"{name}: {meta.status.value}, generation {meta.generation}, model {meta.model}, "
                f"{meta.documents} documents, {meta.passages} passages"
            )
            if meta.last_stats is not None:
                click.echo(f"pass: {_stats_line(meta.last_stats)}")
    if state.error is not None:
        retry = f" (next attempt at {_when(state.next_attempt)})" if state.next_attempt else ""
        raise click.ClickException(f"the pass over {name!r} failed: {_short(state.error, 500)}{retry}")


def _root_cause(error: WorkflowFailureError) -> BaseException:
    cause: BaseException = error
    while isinstance(cause, WorkflowFailureError | ActivityError | ChildWorkflowError) and cause.cause:
        cause = cause.cause
    return cause


def _match_lines(matches: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for match in matches:
        title = f"  {match['title']}" if match.get("title") else ""
        lines.append(f"{match['score']:.3f}  {match['document']}{title}")
        lines.append(f"       {_short(match['text'], EXCERPT_CHARS)}")
    return lines


@knowledge.command("search")
@click.argument("name")
@click.argument("query")
@click.option(
    "--top-k", type=click.IntRange(1, MAX_TOP_K), default=5, show_default=True, help="At most this many."
)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 3600),
    default=60,
    show_default=True,
    help="Seconds to wait for a worker to answer.",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@temporal_options()
def search_collection(
    name: str,
    query: str,
    top_k: int,
    timeout: float,
    as_json: bool,
    temporal_address: str | None,
    namespace: str | None,
    task_queue: str,
) -> None:
    """Search collection NAME by meaning for QUERY; print the best passages with their scores."""
    settings = _settings(temporal_address, namespace, task_queue)

    async def go(client: Client) -> dict[str, Any]:
        await _require_collection(client, settings, name)
        try:
            result: dict[str, Any] = await client.execute_workflow(
                c.KNOWLEDGE_SEARCH_WORKFLOW,
                SearchRequest(collections=[name], query=query, top_k=top_k),
                id=f"knowledge-search-{uuid.uuid4().hex}",
                task_queue=settings.task_queue,
                result_type=dict,
                execution_timeout=timedelta(seconds=timeout),
            )
        except WorkflowFailureError as error:
            cause = _root_cause(error)
            if isinstance(cause, TemporalTimeoutError):
                raise click.ClickException(
                    f"no worker answered the search within {timeout:g} s on task queue "
                    f"{settings.task_queue!r}: start one with `chamvi dev` or `chamvi worker`"
                ) from None
            raise click.ClickException(str(getattr(cause, "message", None) or cause)) from None
        return result

    result = _knowledge_run(settings, go)
    if as_json:
        click.echo(_dump(result))
        return
    matches = result.get("matches") or []
    if not matches:
        _echo_err(f"no matches in {name!r}")
        return
    for line in _match_lines(matches):
        click.echo(line)
    if result.get("truncated"):
        _echo_err(f"(more matched: the result stops at {MAX_CHARS} characters)")


if __name__ == "__main__":
    main()
