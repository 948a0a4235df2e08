"""Connecting to Temporal, loading an app, building its worker: shared by worker.py, the CLI and tests."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from chamvi._connection import connect as connect
from chamvi._lifecycle import memory_index
from chamvi.app import App
from chamvi.approval_tokens import ApprovalTokens
from chamvi.artifacts import ArtifactStore
from chamvi.errors import InvalidAppError
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.plugin import ChamviPlugin


def load_app(ref: str) -> App:
    """Imports ``module:attribute`` (the current directory is importable, as for ``python -m``)."""
    module_name, _, attribute = ref.partition(":")
    if not module_name or not attribute:
        raise InvalidAppError(
            f"app {ref!r} must look like 'module:attribute', e.g. 'examples.support.app:app'"
        )
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InvalidAppError(f"cannot import app module {module_name!r}: {error}") from None
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        raise InvalidAppError(f"{ref!r} is not a chamvi App (found {type(app).__name__})")
    return app


def local_plugin(
    app: App,
    *,
    index: KnowledgeIndex | None = None,
    artifacts: ArtifactStore | None = None,
    max_runs: int | None = None,
    approval_tokens: ApprovalTokens | None = None,
    runtime_tunings: bool = True,
) -> ChamviPlugin:
    """A plugin for tests and benchmarks, with nothing started in the background.

    Its index is ``index`` or an in-memory one, its artifact store ``artifacts`` or an in-memory one,
    and collections pass when asked; ``max_runs`` is the plugin's (4 by default); approval requests
    carry tokens only with ``approval_tokens``; ``runtime_tunings`` as the plugin's, on here (the
    library's plugin has them off): tests and benchmarks run what ``chamvi worker`` runs, and without
    them each run's sandbox imports the workflow modules afresh. Build one to reach what its worker holds
    (``plugin.runtime.events`` for an API beside it), and hand it to :func:`build_worker`.
    """
    return ChamviPlugin(
        app,
        index=index or memory_index(),
        start_collections=False,
        artifacts=artifacts or ArtifactStore.memory(),
        max_runs=max_runs,
        approval_tokens=approval_tokens,
        runtime_tunings=runtime_tunings,
    )


def build_worker(
    client: Client,
    app: App | ChamviPlugin,
    *,
    task_queue: str,
    index: KnowledgeIndex | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=30),
    max_concurrent_activities: int | None = None,
    artifacts: ArtifactStore | None = None,
    max_runs: int | None = None,
    runtime_tunings: bool = True,
) -> Worker:
    """A worker serving chamvi through :class:`ChamviPlugin`: the one way chamvi starts a worker.

    Graceful shutdown lets in-flight activities finish (up to the timeout) before the worker stops,
    so a deploy does not cut a tool call in the middle of its side effect. Given a plugin, the worker
    has its index and lifecycle (``chamvi worker``, ``chamvi dev``). Given an app, as tests and
    benchmarks do, the index is ``index`` or an in-memory one, the artifact store ``artifacts`` or an
    in-memory one, and nothing starts in the background: collections pass when asked
    (:func:`local_plugin`); ``max_runs`` and ``runtime_tunings`` are the plugin's (the most runs
    executing at once, 4 by default; the runtime tunings, on by default here as in ``chamvi worker``).
    """
    plugin = (
        app
        if isinstance(app, ChamviPlugin)
        else local_plugin(
            app, index=index, artifacts=artifacts, max_runs=max_runs, runtime_tunings=runtime_tunings
        )
    )
    return Worker(
        client,
        task_queue=task_queue,
        plugins=[plugin],
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        max_concurrent_activities=max_concurrent_activities,
    )
