"""Connecting to Temporal and building a worker for an app: shared by worker.py, the CLI and tests."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from pathlib import Path

from qdrant_client import AsyncQdrantClient
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig
from temporalio.worker import Worker

from activities import AgentActivities, KnowledgeActivities, LockActivities, ModelActivities, ToolActivities
from chamvi.app import App
from chamvi.errors import InvalidAppError
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KNOWLEDGE_SEARCH, KnowledgeSearch
from chamvi.knowledge.store import KnowledgeStore
from chamvi.settings import Settings
from workflows import WORKFLOWS


async def connect(settings: Settings) -> Client:
    """A client with chamvi's data converter, honouring Temporal's own profiles and env vars."""
    config = ClientConfig.load_client_connect_config()
    if settings.temporal_address:
        config["target_host"] = settings.temporal_address
    config.setdefault("target_host", "localhost:7233")
    if settings.temporal_namespace:
        config["namespace"] = settings.temporal_namespace
    return await Client.connect(**config, data_converter=pydantic_data_converter)


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


def open_qdrant(settings: Settings) -> AsyncQdrantClient:
    """``QDRANT_URL`` when set (any number of processes share it), else local mode under the data folder.

    Local mode allows one process per folder: the worker (and, in ``chamvi dev``, the API) own it.
    """
    if settings.qdrant_url:
        return AsyncQdrantClient(url=settings.qdrant_url)
    path = settings.data / "qdrant"
    path.mkdir(parents=True, exist_ok=True)
    return AsyncQdrantClient(path=str(path))


def build_worker(
    client: Client,
    app: App,
    *,
    task_queue: str,
    store: KnowledgeStore | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(seconds=30),
    max_concurrent_activities: int | None = None,
) -> Worker:
    """A worker serving every chamvi workflow and activity for ``app``.

    Graceful shutdown lets in-flight activities finish (up to the timeout) before the worker
    stops, so a deploy does not cut a tool call in the middle of its side effect. ``store`` is
    where knowledge lives; without one, an in-memory Qdrant serves (fine for apps without
    collections, and for tests).
    """
    store = store or KnowledgeStore(AsyncQdrantClient(location=":memory:"))
    search = KnowledgeSearch(store, app.embedders)
    app.provided.set(KNOWLEDGE_SEARCH, search)
    agents = AgentActivities(app)
    model = ModelActivities(app)
    tools = ToolActivities(app)
    locks = LockActivities()
    knowledge = KnowledgeActivities(app, store, Indexer(store, app.embedders), search)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            agents.describe_agent,
            model.call_model,
            tools.call_tool,
            locks.enqueue_lock,
            locks.run_is_open,
            knowledge.knowledge_pass,
            knowledge.knowledge_request_sync,
            knowledge.knowledge_search,
        ],
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        max_concurrent_activities=max_concurrent_activities,
        # heartbeats carry cancellation: without this, the SDK holds them back up to 0.8 x the timeout
        max_heartbeat_throttle_interval=timedelta(seconds=2),
    )
