"""Serving the API with uvicorn, inside an event loop that may run a worker too (``chamvi dev``)."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from chamvi._constants import DEFAULT_API_PORT

DEFAULT_PORT = DEFAULT_API_PORT
ACCESS_LOGGER = "uvicorn.access"


class _WithoutQueryString(logging.Filter):
    """Cuts the query string off the path of uvicorn's access log lines.

    A client may put a secret in the URL (``?token=...``); the request is refused, but uvicorn logs
    the URL whole. uvicorn logs ``(client, method, path, http version, status)`` with the path
    percent-quoted, so the first ``?`` is where its query string starts.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], args[2].partition("?")[0], *args[3:])
        return True


def _keep_query_strings_out_of_the_access_log() -> None:
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, _WithoutQueryString) for f in logger.filters):
        logger.addFilter(_WithoutQueryString())


class _Server(uvicorn.Server):
    """Leaves signals to the process it runs in: ``chamvi dev`` stops the worker first, then this."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(
    api: FastAPI,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    log_level: str = "info",
    access_log: Path | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``api`` that leaves signal handling to the process around it.

    Run it with ``await server(api).serve()``; set ``should_exit`` to stop it.

    The access log shows paths and statuses, never headers nor query strings, so tokens stay out of it;
    with ``access_log``, its lines go to that file (appended) instead of the terminal.
    """
    config = uvicorn.Config(
        api,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="off",
        ws="none",
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    # after the Config, which sets up uvicorn's loggers
    _keep_query_strings_out_of_the_access_log()
    if access_log is not None:
        _access_log_to(access_log)
    return _Server(config)


def _access_log_to(path: Path) -> None:
    logger = logging.getLogger(ACCESS_LOGGER)
    for handler in logger.handlers:
        logger.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False


def bind(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket (``port=0``: a free one; read it back with ``getsockname()``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def serve(
    api: FastAPI, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, log_level: str = "info"
) -> None:
    """Serves ``api`` until cancelled."""
    await server(api, host=host, port=port, log_level=log_level).serve()
