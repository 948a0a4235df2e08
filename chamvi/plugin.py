"""``ChamviPlugin``: everything a Temporal worker needs to serve a chamvi app, in one object.

Add it to ``Client.connect(..., plugins=[ChamviPlugin(app)])`` and any ``Worker`` built on that
client serves chamvi's workflows and activities beside your own; or pass it to one ``Worker(...,
plugins=[...])``. ``chamvi worker``, ``chamvi dev``, ``python worker.py`` and the tests all start
workers this way (``chamvi.runtime.build_worker``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from chamvi._activity_boundary import ActivityErrors
from chamvi._inbound import InboundContext
from chamvi._lifecycle import boot_collections, check_index, close_index, index_location, open_index
from chamvi._run_slots import DEFAULT_MAX_RUNS
from chamvi._sandbox_runner import without_payload_contexts
from chamvi.agent_revisions import AgentRevisionStore
from chamvi.app import App
from chamvi.approval_tokens import ApprovalTokens, approval_tokens
from chamvi.artifacts import ArtifactStore, open_artifact_store
from chamvi.channels import LifecycleChannel
from chamvi.client import ChamviClient
from chamvi.conversations.store import ConversationStore
from chamvi.errors import BackgroundError, ChamviError
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.schedules import boot_schedules
from chamvi.settings import Settings
from chamvi.state import StateStore
from chamvi.state.views import StateViews
from chamvi.telemetry._otel import ChamviTelemetry
from chamvi.worker_state import AppRuntime

log = logging.getLogger(__name__)

PLUGIN_NAME = "chamvi.ChamviPlugin"

SANDBOX_PASSTHROUGH = (
    "chamvi._constants",
    "chamvi.errors",
    "chamvi.models",
    "chamvi.retry",
    "chamvi._transcript",
)
"""chamvi's shared kernel, loaded once and shared with every workflow instance instead of being
re-imported into each sandbox: it is pure data and functions (pydantic models, constants, error
classes, digests), holds no state a workflow could change, and the pydantic models must be the same
classes the data converter decodes into. ``pydantic`` and ``pydantic_core`` pass through already
(temporalio's defaults)."""

RUN_MODULES_PASSTHROUGH = (
    "chamvi.workflows.agent_run",
    "chamvi.workflows._approvals",
    "chamvi.workflows._calls",
    "chamvi.workflows._model_calls",
    "chamvi.workflows._run_record",
    "chamvi.workflows._tool_calls",
)
"""``AgentRun``'s own modules (``agent_run`` and every helper module it imports, which
``tests/unit/test_layers.py`` holds this list to), loaded once instead of imported (and, without
``.pyc`` files, compiled) again in every run's sandbox: about 1 ms of a 10-step run's CPU per
step in ``bench/runs.py``. They hold no module-level state a run could change (constants,
functions, classes whose state lives in their instances), and they stay under the replay tests of
``tests/histories``; what passes through is not checked by the sandbox's restrictions, so they
must keep to workflow code's rules (no clock, no I/O, no randomness) by themselves. The other
workflow modules (conversations, knowledge, schedules, which run far fewer workflow tasks) and a
user's own are still imported afresh for each run, as the sandbox intends; exact names, so that
nothing else under ``chamvi.workflows`` passes."""

_heap_frozen = False


def _freeze_heap() -> None:
    """Moves what the process holds when its first worker starts out of the collector's reach, once.

    That heap is the imports (temporalio, pydantic, qdrant-client, openai, ...): hundreds of
    thousands of objects that live as long as the process, and that every full collection walked
    again. Each run leaves cyclic garbage (its sandbox's modules) that only a full collection frees,
    so those walks came every few runs, about 150 ms each on 2 cores: 1.3 ms per agent step in
    ``bench/runs.py``. Frozen, a full collection walks only what was made since (``gc.freeze``).
    """
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.collect()
        gc.freeze()


HEARTBEAT_THROTTLE = timedelta(seconds=2)
"""Heartbeats carry cancellation to a tool call; the SDK's default holds them back for up to 60 s."""


def _data_converter(existing: DataConverter | None) -> DataConverter:
    """A converter for pydantic payloads, since chamvi's inputs and results are pydantic models.

    The rest of a converter the user chose (codec, failure converter) is kept.
    """
    if existing is None or existing is DataConverter.default:
        return pydantic_data_converter
    if issubclass(existing.payload_converter_class, PydanticPayloadConverter):
        return existing
    return dataclasses.replace(existing, payload_converter_class=PydanticPayloadConverter)


def _workflow_runner(existing: WorkflowRunner | None, tunings: bool) -> WorkflowRunner:
    if existing is None:
        existing = SandboxedWorkflowRunner()
    if not isinstance(existing, SandboxedWorkflowRunner):
        return existing  # an unsandboxed runner the user chose
    passthrough = (*SANDBOX_PASSTHROUGH, *(RUN_MODULES_PASSTHROUGH if tunings else ()))
    restrictions = existing.restrictions.with_passthrough_modules(*passthrough)
    return dataclasses.replace(existing, restrictions=restrictions)


def _trace_content(asked: bool | None, settings: Settings | None) -> bool:
    if asked is not None:
        return asked
    return settings is not None and settings.trace_content


class ChamviPlugin(SimplePlugin):
    """A temporalio plugin that hands a worker everything it needs to serve ``app``.

    That is the data converter, workflows, activities, sandbox passthrough, failure types, and the
    worker's lifecycle.

    The lifecycle, around each worker's run: open the knowledge index (unless given) and check it
    against the app before the worker polls (with ``runtime_tunings``, the first worker of the
    process then freezes the heap its imports built, out of the garbage collector's walks); start
    the app's collections and their resync schedules, and create or update the app's agent
    schedules, in the background once it runs; start the app's channels that receive on their own
    (``start(ctx)``) once it polls; when its run ends, stop those channels first, then close the
    index it opened.

    What the worker holds while it serves the app (stores, provided values, event hub, run slots,
    the tool sets factories built) is the plugin's :attr:`runtime`, never written into the ``App``:
    two plugins built from one ``App`` share nothing but its declarations (its listeners, its
    ``on_error`` hook).

    Args:
        app: the app to serve.
        index: the knowledge index (Qdrant); by default opened from ``settings``: ``QDRANT_URL``, else
            the embedded Qdrant Edge store in the data folder.
        settings: where the default index and artifact store live; ``Settings.from_env()`` when
            not given.
        artifacts: the artifact store (attachments, ``ctx.artifacts``); by default opened from
            ``settings``: ``CHAMVI_ARTIFACTS_URL``, else the data folder's ``artifacts``.
        start_collections: start the app's collections when a worker runs (a pass each, resync
            schedules); off, they wait for ``chamvi knowledge sync``.
        trace_content: put messages, tool arguments and results on the spans (see
            ``chamvi.telemetry._otel``); by default ``settings.trace_content``, off without settings.
        start_schedules: create or update the app's schedules (``App.schedule``) when a worker runs,
            and delete the ones the code no longer declares; off, they are left as they are.
        start_channels: start the app's channels that have ``start(ctx)`` / ``stop()``; off, this
            worker receives nothing on its own (the seed's ``start({ channels: false })``), and
            runs still send through every channel's ``out``. By default ``App.start_channels``,
            unless ``settings.no_channels`` (``CHAMVI_NO_CHANNELS=true``).
        max_runs: the most runs executing at once in this process (the seed's
            ``concurrencyMaxRuns``, see ``chamvi._run_slots``); by default ``settings.max_runs``
            (``CHAMVI_MAX_RUNS``), else 4.
        approval_tokens: signs the token (and the link to the approvals page) that approval
            requests sent through channels carry (``chamvi.approval_tokens``); by default from
            ``settings`` (``CHAMVI_APPROVAL_SECRET``, else the data folder's generated secret, and
            ``CHAMVI_PUBLIC_URL``) once a worker is configured; without settings, requests carry none.
        agent_revisions: where the revisions of agents defined at runtime live
            (``chamvi.agent_revisions``); by default the artifact store's object store, which the
            HTTP API and every other worker share.
        runtime_tunings: three tunings of a worker's CPU, each measured in ``bench/runs.py``, none
            changing a command a workflow issues (the replay tests run every saved history with
            them on and off): ``AgentRun``'s own modules pass through the sandbox
            (:data:`RUN_MODULES_PASSTHROUGH`), the sandbox answers the payload contexts outside
            itself when no codec or external storage reads them (``chamvi._sandbox_runner``), and
            the first worker of the process freezes the heap its imports built (``gc.freeze()``).
            Off by default: freezing the heap is a choice of the whole process, which a library
            leaves to the application; ``chamvi worker`` and ``chamvi dev``, processes chamvi owns,
            turn them on.
    """

    def __init__(
        self,
        app: App,
        *,
        index: KnowledgeIndex | None = None,
        settings: Settings | None = None,
        start_collections: bool = True,
        trace_content: bool | None = None,
        artifacts: ArtifactStore | None = None,
        start_schedules: bool = True,
        start_channels: bool | None = None,
        max_runs: int | None = None,
        approval_tokens: ApprovalTokens | None = None,
        agent_revisions: AgentRevisionStore | None = None,
        runtime_tunings: bool = False,
    ) -> None:
        self.app = app
        self.runtime_tunings = runtime_tunings
        """Whether this plugin's workers run with the three runtime tunings (see the class)."""
        if max_runs is None:
            max_runs = settings.max_runs if settings is not None else DEFAULT_MAX_RUNS
        self.runtime = AppRuntime(
            app,
            artifacts=artifacts,
            max_runs=max_runs,
            skills_cache=settings.data / "skills" if settings is not None else None,
            data=settings.data if settings is not None else None,
            approval_tokens=approval_tokens,
            revisions=agent_revisions,
        )
        """This plugin's holdings for the app, handed to its activities (and to an API beside it)."""
        self.slots = self.runtime.slots
        """The run slots this worker's model and tool calls take (its runtime's)."""
        self._artifacts = artifacts
        self._start_channels = (
            start_channels
            if start_channels is not None
            else app.start_channels and not (settings is not None and settings.no_channels)
        )
        self._started_channels: list[LifecycleChannel] = []
        self._channels_task: asyncio.Task[None] | None = None
        self._index = index
        self._owns_index = index is None
        self._settings = settings
        self._start_collections = start_collections
        self._checked = False
        self._boot: asyncio.Task[None] | None = None
        self._booted = asyncio.Event()
        self._start_schedules = start_schedules
        self._schedules: asyncio.Task[None] | None = None
        self._schedules_synced = asyncio.Event()
        super().__init__(
            PLUGIN_NAME,
            data_converter=_data_converter,
            activities=self._with_activities,
            workflows=self._with_workflows,
            workflow_runner=lambda existing: _workflow_runner(existing, runtime_tunings),
            interceptors=[
                ActivityErrors(),
                ChamviTelemetry(
                    app,
                    capture_content=_trace_content(trace_content, settings),
                    agents=self.runtime.agents,
                ),
            ],
            # a chamvi error raised in workflow code is a bug of a definition, not of a worker:
            # it fails the workflow instead of retrying its task forever
            workflow_failure_exception_types=[ChamviError],
        )

    @property
    def index(self) -> KnowledgeIndex:
        """The knowledge index, opened on first use when none was given."""
        if self._index is None:
            self._index = open_index(self._settings or Settings.from_env())
        return self._index

    @property
    def artifacts(self) -> ArtifactStore:
        """The artifact store, opened on first use when none was given."""
        if self._artifacts is None:
            self._artifacts = open_artifact_store(self._settings or Settings.from_env())
        return self._artifacts

    async def prepare(self) -> None:
        """Loads the skills, opens the index and checks it, once; a worker's run does it if nobody did.

        Every collection of the index is opened here, before the worker polls: opening one of the
        embedded store holds the GIL for as long as it reads (0.1-9 s), which in the middle of a run
        would stall every activity and heartbeat of the worker (``VectorStore.open_all``). A damaged
        collection is logged and left out, so the worker serves the rest; using it raises
        ``StoreDamagedError``, which says how to rebuild it.

        Raises:
            InvalidSkillError: a bad skill (one line naming the file).
            IndexUnavailableError: the index cannot be opened or read.
            InvalidAppError: a declared collection's name is held by a managed collection.
        """
        if self._checked:
            return
        # each agent's catalog, saved to the artifact store before any run can record its version
        await self.runtime.skills.load(artifacts=self.artifacts)
        location = index_location(self._settings) if self._settings is not None else "the knowledge store"
        await check_index(self.app, self.index, location)
        await self.index.vectors.open_all()
        self._checked = True

    async def collections_started(self) -> None:
        """Returns once a running worker has asked every collection for a pass (or failed to)."""
        if self._start_collections:
            await self._booted.wait()

    async def schedules_started(self) -> None:
        """Returns once a running worker has brought the app's schedules in line (or failed to)."""
        if self._start_schedules:
            await self._schedules_synced.wait()

    def _with_workflows(self, existing: Sequence[type] | None) -> Sequence[type]:
        from chamvi.workflows import WORKFLOWS

        return [*(existing or []), *WORKFLOWS]

    def _with_activities(self, existing: Sequence[Callable[..., Any]] | None) -> Sequence[Callable[..., Any]]:
        from chamvi.activities import (
            AgentActivities,
            ConversationActivities,
            KnowledgeActivities,
            LockActivities,
            McpActivities,
            ModelActivities,
            RunActivities,
            ScheduleActivities,
            StateActivities,
            ToolActivities,
        )

        app, index, runtime = self.app, self.index, self.runtime
        search = KnowledgeSearch(
            index, app.embedders, retry=app.retry.embedding, declared=frozenset(app.collections)
        )
        # agent state lives in the same Qdrant as the knowledge index (see chamvi.state.store)
        state = StateStore(index.client, index.prefix)
        runtime.open(state=state, search=search, artifacts=self.artifacts)
        if runtime.approval_tokens is None and self._settings is not None:
            runtime.approval_tokens = approval_tokens(self._settings)
        agents = AgentActivities(runtime)
        conversations = ConversationStore(runtime.artifacts)
        model = ModelActivities(runtime, conversations=conversations)
        turns = ConversationActivities(runtime, conversations)
        tools = ToolActivities(runtime)
        locks = LockActivities()
        indexer = Indexer(index, app.embedders, retry=app.retry.embedding)
        knowledge = KnowledgeActivities(app, index, indexer, search)
        return [
            *(existing or []),
            agents.describe_agent,
            agents.agent_registry,
            model.call_model,
            model.extract,
            tools.call_tool,
            RunActivities().wait_for_run,
            locks.enqueue_lock,
            locks.run_is_open,
            knowledge.knowledge_pass,
            knowledge.knowledge_request_sync,
            knowledge.knowledge_search,
            McpActivities(runtime).list_mcp_tools,
            StateActivities(StateViews(app, state, runtime.agents)).state_list,
            ScheduleActivities(runtime.agents).dispatch_scheduled,
            turns.load,
            turns.seen,
            turns.record_turn,
            turns.summarize,
            turns.reply,
        ]

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Adds chamvi to the worker, and lets heartbeats carry cancellation within seconds.

        With ``runtime_tunings``, its sandbox answers the payload contexts outside the sandbox when
        the worker's converter has no codec and no external storage to read them
        (``chamvi._sandbox_runner``).
        """
        config = super().configure_worker(config)
        runner, client = config.get("workflow_runner"), config.get("client")
        if self.runtime_tunings and runner is not None and client is not None:
            config["workflow_runner"] = without_payload_contexts(runner, client.data_converter)
        throttle = config.get("max_heartbeat_throttle_interval") or HEARTBEAT_THROTTLE
        config["max_heartbeat_throttle_interval"] = min(throttle, HEARTBEAT_THROTTLE)
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """Adds chamvi to a replayer, with the sandbox a worker of this plugin would run."""
        config = super().configure_replayer(config)
        runner, converter = config.get("workflow_runner"), config.get("data_converter")
        if self.runtime_tunings and runner is not None and converter is not None:
            config["workflow_runner"] = without_payload_contexts(runner, converter)
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Any]) -> None:
        """The lifecycle around one worker's run (see the class)."""
        try:
            await self.prepare()
            if self.runtime_tunings:
                _freeze_heap()
            task_queue = worker.config(active_config=True)["task_queue"]
            if self._start_collections:
                self._booted.clear()
                self._boot = asyncio.ensure_future(self._start(worker.client, task_queue))
            if self._start_schedules:
                self._schedules_synced.clear()
                self._schedules = asyncio.ensure_future(self._sync_schedules(worker.client, task_queue))
            if self._start_channels:
                # a task of its own so that it runs once next() polls, beside the worker
                self._channels_task = asyncio.ensure_future(
                    self._start_lifecycle_channels(worker.client, task_queue)
                )
            await next(worker)
        finally:
            await self.stop_channels()
            for task in (self._boot, self._schedules):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await self.runtime.events.close()
            await self.app.errors.drain()
            await self.runtime.mcp_sessions.close()
            await self.close()

    async def _start_lifecycle_channels(self, client: Client, task_queue: str) -> None:
        """Starts each channel that receives on its own; one that fails to start is logged and skipped.

        A channel's ``start`` must not keep the worker from serving runs: the worker goes on without it.
        """
        runs = ChamviClient(client, task_queue=task_queue)
        for channel in self.app.channels.values():
            if not isinstance(channel, LifecycleChannel):
                continue
            try:
                await channel.start(InboundContext(channel.name, self.app.agents, runs))
            except Exception as error:
                self._channel_failed(channel, "start", error, " (the worker goes on)")
                continue
            self._started_channels.append(channel)

    async def stop_channels(self) -> None:
        """Stops the channels this plugin started, last started first; safe to repeat.

        The worker's run calls it when it ends. Temporal has no hook for "shutdown requested", so a
        process that stops its worker (``chamvi worker`` and ``chamvi dev`` on SIGINT/SIGTERM) calls
        it first, before ``Worker.shutdown()``: nothing new comes in while in-flight calls drain. A
        failing ``stop`` is logged, never raised.
        """
        if self._channels_task is not None:
            self._channels_task.cancel()
            await asyncio.gather(self._channels_task, return_exceptions=True)
            self._channels_task = None
        while self._started_channels:
            channel = self._started_channels.pop()
            try:
                await channel.stop()
            except Exception as error:
                self._channel_failed(channel, "stop", error)

    def _channel_failed(
        self, channel: LifecycleChannel, what: str, error: Exception, after: str = ""
    ) -> None:
        """Hands a channel's failed ``start``/``stop`` to the app's ``on_error``, else logs it."""
        name = getattr(channel, "name", "?")
        line = f"channel {name!r} failed to {what}: {type(error).__name__}: {error}{after}"
        self.app.errors.report(
            BackgroundError(line, source=f"channel.{what}", cause=error), lambda: log.error("%s", line)
        )

    async def _start(self, client: Client, task_queue: str) -> None:
        try:
            await boot_collections(client, self.app, self.index, task_queue, self.app.errors)
        finally:
            self._booted.set()

    async def _sync_schedules(self, client: Client, task_queue: str) -> None:
        try:
            await boot_schedules(client, self.app.schedules, task_queue, self.app.errors)
        finally:
            self._schedules_synced.set()

    async def close(self) -> None:
        """Closes the index if this plugin opened it (a later worker opens it again); safe to repeat."""
        if self._owns_index and self._index is not None:
            index, self._index = self._index, None
            self._checked = False
            await close_index(index)
