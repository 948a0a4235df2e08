"""``chamvi knowledge list`` / ``sync`` / ``search``: the collections, talking to Temporal only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import click
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi._constants import KNOWLEDGE_MAX_CHARS as MAX_CHARS
from chamvi._constants import KNOWLEDGE_MAX_TOP_K as MAX_TOP_K
from chamvi._starters import request_sync
from chamvi.cli._common import POLL_SECONDS, T, json_option, run_with_client, temporal_options
from chamvi.cli._output import Spinner, columns, dump, echo_err, short, when
from chamvi.models.knowledge import CollectionMeta, CollectionState, PassStats
from chamvi.settings import Settings

KNOWLEDGE_QUERY_TIMEOUT = timedelta(seconds=5)
EXCERPT_CHARS = 240


@click.group()
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
    return run_with_client(settings, lambda chamvi: operation(chamvi.client))


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
        "skipped": _skipped(meta),
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


def _skipped(meta: CollectionMeta) -> int:
    """What the last pass left out (links, FIFOs, large or non-UTF-8 files, PDFs past their limits).

    Its ``last_stats.problems`` say why for the first 20, the worker's log for all.
    """
    return meta.last_stats.skipped if meta.last_stats is not None else 0


def _activity(state: CollectionState) -> str:
    if state.running:
        return "running" + (", 1 queued" if state.queued else "")
    if state.next_attempt is not None:
        return f"retry at {when(state.next_attempt)}"
    return "queued" if state.queued else "idle"


def _collections_table(states: list[CollectionState]) -> list[str]:
    header = ("NAME", "STATUS", "GEN", "MODEL", "DOCS", "PASSAGES", "SKIPPED", "LAST PASS", "ACTIVITY")
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
                str(_skipped(meta)),
                when(meta.last_pass),
                _activity(state),
            )
        )
    lines = columns(cells)
    lines.extend(f"{s.name}: error: {short(s.error, 300)}" for s in states if s.error)
    return lines


@knowledge.command("list")
@json_option()
@temporal_options()
def list_collections(as_json: bool, settings: Settings) -> None:
    """List the collections: status, generation, model, counts, last pass, errors.

    The counts include the entries the last pass skipped (the worker's log names each).
    """

    async def go(client: Client) -> list[CollectionState]:
        names = await _collection_names(client, settings.task_queue)
        return list(await asyncio.gather(*(_collection_state(client, settings, n) for n in names)))

    states = _knowledge_run(settings, go)
    if as_json:
        click.echo(dump([_collection_row(state) for state in states]))
    elif not states:
        echo_err(
            f"no collections on task queue {settings.task_queue!r} "
            "(a worker starts the app's collections when it boots)"
        )
    else:
        for line in _collections_table(states):
            click.echo(line)


async def _pass_progress(client: Client, name: str) -> PassStats | None:
    """The counts the running pass last reported (its activity heartbeats them).

    The activity runs in the pass's own workflow, a child of the collection's; a collection run
    recorded before pass workflows runs it itself.
    """
    with contextlib.suppress(Exception):
        description = await client.get_workflow_handle(c.KNOWLEDGE_ID_PREFIX + name).describe()
        raw = description.raw_description
        for child in raw.pending_children:
            if child.workflow_type_name == c.KNOWLEDGE_PASS_WORKFLOW:
                pass_run = client.get_workflow_handle(child.workflow_id, run_id=child.run_id or None)
                raw = (await pass_run.describe()).raw_description
        for pending in raw.pending_activities:
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


class _SyncProgress(Spinner):
    """The collection's pass: queued, running with the counts it heartbeats, or waiting for a retry."""

    def update(self, state: CollectionState, stats: PassStats | None) -> None:
        if state.running:
            text = "pass running" + (
                f": {stats.read} read, {stats.embedded} embedded ({stats.passages} passages)"
                if stats is not None and stats.read
                else ""
            )
        elif state.next_attempt is not None:
            text = f"waiting for the retry at {when(state.next_attempt)} after: {short(state.error, 120)}"
        else:
            text = "pass queued"
        self.show(text)


@knowledge.command("sync")
@click.argument("name")
@click.option(
    "--wait",
    "wait_for_it",
    is_flag=True,
    help="Show progress until the requested pass ends; print its counts.",
)
@json_option("With --wait: print the collection as JSON.")
@temporal_options()
def sync_collection(name: str, wait_for_it: bool, as_json: bool, settings: Settings) -> None:
    """Ask collection NAME for a pass now (during a pass: exactly one more after it)."""

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
        echo_err(f"\nstopped watching; the pass goes on: chamvi knowledge list (collection {name!r})")
        raise click.exceptions.Exit(130) from None
    if state is None:
        click.echo(f"sync requested for {name!r}")
        return
    if as_json:
        click.echo(dump(_collection_row(state)))
    elif state.error is None:
        meta = state.meta
        if meta is not None:
            click.echo(
                f"{name}: {meta.status.value}, generation {meta.generation}, model {meta.model}, "
                f"{meta.documents} documents, {meta.passages} passages"
            )
            if meta.last_stats is not None:
                click.echo(f"pass: {meta.last_stats.line()}")
    if state.error is not None:
        retry = f" (next attempt at {when(state.next_attempt)})" if state.next_attempt else ""
        raise click.ClickException(f"the pass over {name!r} failed: {short(state.error, 500)}{retry}")


def _match_lines(matches: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for match in matches:
        title = f"  {match['title']}" if match.get("title") else ""
        lines.append(f"{match['score']:.3f}  {match['document']}{title}")
        lines.append(f"       {short(match['text'], EXCERPT_CHARS)}")
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
@json_option()
@temporal_options()
def search_collection(
    name: str, query: str, top_k: int, timeout: float, as_json: bool, settings: Settings
) -> None:
    """Search collection NAME by meaning for QUERY; print the best passages with their scores."""

    async def go(client: Client) -> dict[str, Any]:
        await _require_collection(client, settings, name)
        # an update of the collection's own workflow: a workflow per search would stay in the list
        from chamvi.knowledge.remote import CollectionSearch

        search = CollectionSearch(client, task_queue=settings.task_queue, timeout=timeout)
        result = await search.search([name], query, top_k=top_k)
        return result.model_dump(mode="json", exclude_none=True)

    result = _knowledge_run(settings, go)
    if as_json:
        click.echo(dump(result))
        return
    matches = result.get("matches") or []
    if not matches:
        echo_err(f"no matches in {name!r}")
        return
    for line in _match_lines(matches):
        click.echo(line)
    if result.get("truncated"):
        echo_err(f"(more matched: the result stops at {MAX_CHARS} characters)")
