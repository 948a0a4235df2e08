"""Running processes from the command line: a worker until a signal, and the ``chamvi dev`` stack.

``chamvi worker`` and ``chamvi dev`` both build their worker with ``build_worker`` (``ChamviPlugin``
inside), so they open and check the knowledge index the same way and start collections the same way;
``chamvi dev`` only adds the Temporal dev server (``chamvi._dev``) and the HTTP API in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from chamvi._constants import DEFAULT_API_PORT
from chamvi._dev import DevServer, write_stack
from chamvi._lifecycle import index_location
from chamvi.app import App
from chamvi.approval_tokens import approval_tokens
from chamvi.cli._common import connect_or_fail
from chamvi.http import Token, build_api
from chamvi.http.process import ApiSocket, dev_tokens, listen
from chamvi.knowledge.collections import ManagedRoutes
from chamvi.knowledge.embedders import DEFAULT_EMBEDDING_MODEL
from chamvi.plugin import ChamviPlugin
from chamvi.runtime import build_worker, connect
from chamvi.settings import Settings
from chamvi.webhooks import WebhookChannel


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
    before_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Runs ``worker`` until ``stop`` is set, then shuts it down gracefully (in-flight activities finish).

    ``background`` (the HTTP API in ``chamvi dev``) runs beside it and is cancelled when it stops;
    ``before_shutdown`` (the plugin's ``stop_channels``) runs before the shutdown begins.
    """
    running = asyncio.ensure_future(worker.run())
    stopping = asyncio.ensure_future(stop.wait())
    side = asyncio.ensure_future(background) if background is not None else None
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            echo("stopping: in-flight activities finish first")
            if before_shutdown is not None:
                await before_shutdown()
            await worker.shutdown()
    finally:
        stopping.cancel()
        if side is not None:
            side.cancel()
            await asyncio.gather(side, return_exceptions=True)
    await running


def telemetry_line(settings: Settings) -> str:
    """Where this process's metrics and traces go, as a sentence after a space; empty when nowhere."""
    parts = []
    if settings.metrics_address:
        parts.append(f"metrics at http://{settings.metrics_address}/metrics")
    if settings.otlp_endpoint:
        parts.append(f"traces to {settings.otlp_endpoint}")
    sentence = ", ".join(parts)
    return f" {sentence[:1].upper()}{sentence[1:]}." if parts else ""


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


async def serve_worker(
    settings: Settings, app: App, *, echo: Callable[[str], None], describe: Callable[[], str]
) -> None:
    """``chamvi worker``: a worker for ``app`` until SIGINT/SIGTERM; the index is checked before it polls."""
    stop = asyncio.Event()
    with stop_on_signals(stop):
        plugin = ChamviPlugin(app, settings=settings, runtime_tunings=True)
        try:
            await plugin.prepare()
            client = await connect_or_fail(settings, serving=True)
            worker = build_worker(client, plugin, task_queue=settings.task_queue)
            echo(describe())
            await run_worker(worker, stop, echo, before_shutdown=plugin.stop_channels)
        finally:
            await plugin.close()


def managed_routes(app: App, settings: Settings) -> ManagedRoutes:
    """The app's ``ManagedRoutes`` with the command line's and the environment's choices on top.

    Raises:
        InvalidAgentDefinitionError: a base path or body limit the routes cannot take.
    """
    return app.managed.overridden(
        enabled=settings.knowledge_routes,
        base_path=settings.knowledge_base_path,
        max_body_bytes=settings.knowledge_body_limit,
    )


def dev_knowledge_model(settings: Settings, app: App) -> str:
    """The managed collections' model in ``chamvi dev``, which works without a choice.

    ``CHAMVI_KNOWLEDGE_MODEL``, else the app's ``embedding_model``, else the offline model shipped
    with chamvi. The laptop stack works without a choice, so the README's tour creates a collection at once;
    ``chamvi api`` still requires one (a production collection's model is not picked by default).
    """
    return settings.knowledge_model or app.embedding_model or DEFAULT_EMBEDDING_MODEL


ACCESS_LOG_FILE = "api-access.log"
"""The HTTP API's access log in ``chamvi dev``'s data folder (unless ``--verbose``)."""


async def _watch(server: DevServer, stop: asyncio.Event | None = None) -> None:
    """Raises when the server exits; with ``stop``, sets it first so the worker drains."""
    while True:
        error = server.exit_error()
        if error is not None:
            if stop is not None:
                stop.set()
            raise error
        await asyncio.sleep(0.5)


async def serve_dev(
    server: DevServer,
    settings: Settings,
    app: App,
    *,
    echo: Callable[[str], None],
    stop: asyncio.Event | None = None,
    api_port: int = DEFAULT_API_PORT,
    verbose: bool = False,
) -> None:
    """Starts the server, waits for it, runs a worker for ``app`` and the HTTP API until SIGINT/SIGTERM.

    The data folder, the ports, the API's tokens and the knowledge index are checked before anything
    starts. The caller
    stops the server (``server.stop()`` in a ``finally``), so it stops even when this coroutine is
    interrupted.
    """
    stop = stop or asyncio.Event()
    with stop_on_signals(stop):
        server.reserve()
        api_socket = listen("127.0.0.1", api_port)
        # approval requests link to this API's approvals page unless CHAMVI_PUBLIC_URL says otherwise
        settings = replace(settings, public_url=settings.public_url or api_socket.url)
        plugin = ChamviPlugin(app, settings=settings, runtime_tunings=True)
        try:
            tokens = dev_tokens(server.config.data, settings.tokens)
            await plugin.prepare()
            access_log = None if verbose else server.config.data / ACCESS_LOG_FILE
            await _serve_dev(server, settings, plugin, echo, stop, api_socket, tokens, access_log)
        finally:
            api_socket.sock.close()
            await plugin.close()


async def _serve_dev(
    server: DevServer,
    settings: Settings,
    plugin: ChamviPlugin,
    echo: Callable[[str], None],
    stop: asyncio.Event,
    api_socket: ApiSocket,
    tokens: tuple[list[Token], str | None],
    access_log: Path | None,
) -> None:
    """The stack once its ports are bound.

    ``tokens``: what ``dev_tokens`` answered, the API's tokens and the value it generated;
    ``access_log``: the file for the API's access log, None for the terminal.
    """
    server.start()
    config = server.config
    echo(
        f"Temporal dev server (pid {server.pid}) starting at {config.address}, "
        f"data in {config.data}, log in {config.log_path}"
    )
    await first_of(server.wait_ready(), stop.wait(), _watch(server))
    if stop.is_set():
        return
    app = plugin.app
    client = await connect(settings.with_overrides(temporal_address=config.address), serving=True)
    worker = build_worker(client, plugin, task_queue=settings.task_queue)
    api_tokens, generated = tokens
    api = build_api(
        app,
        client,
        plugin.index,
        tokens=api_tokens,
        task_queue=settings.task_queue,
        knowledge_model=dev_knowledge_model(settings, app),
        artifacts=plugin.artifacts,
        attachment_max_bytes=settings.attachment_max_bytes,
        schedule_min_interval=settings.schedule_min_interval,
        managed_routes=managed_routes(app, settings),
        runtime=plugin.runtime,
        approval_tokens=plugin.runtime.approval_tokens or approval_tokens(settings),
    )
    # so that `chamvi mcp --data DATA` started by an MCP host (without TEMPORAL_ADDRESS) finds the stack
    # and `runs watch`, `dispatch --follow` and `chat` find its API: custom ports are given once
    ui = f"http://localhost:{config.ui}"
    token_file = config.data / "api-token"
    stack = write_stack(
        config.data,
        config.address,
        config.namespace,
        settings.task_queue,
        ui=ui,
        api_url=api_socket.url,
        token_file=token_file if generated is not None else None,
    )
    watcher = asyncio.ensure_future(_watch(server, stop))
    try:
        echo(f"Temporal UI at {ui} (namespace {config.namespace!r})")
        echo(
            f"worker for {settings.app} on task queue {settings.task_queue!r}, "
            f"agents: {', '.join(app.agents) or 'none'} (at most {settings.max_runs} runs at once), "
            f"knowledge in {index_location(settings)}."
            f"{telemetry_line(settings)} Ctrl-C to stop."
        )
        url = api_socket.url
        logged = f", access log in {access_log}" if access_log is not None else ""
        echo(f"HTTP API at {url} (docs at {url}/docs, approvals page at {url}/ui{logged})")
        hooks = [name for name, channel in app.channels.items() if isinstance(channel, WebhookChannel)]
        if hooks:
            echo("webhooks at " + ", ".join(f"{url}/channels/{name}/events" for name in hooks))
        if generated is not None:
            echo(f"API token (all permissions, in {token_file}): {generated}")
        await run_worker(
            worker,
            stop,
            echo,
            api_socket.serve(api, access_log=access_log),
            before_shutdown=plugin.stop_channels,
        )
    finally:
        with contextlib.suppress(OSError):
            stack.unlink()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    died = watcher.exception() if watcher.done() and not watcher.cancelled() else None
    if died is not None:
        raise died
