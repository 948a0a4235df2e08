"""Serving the API over real HTTP in a test: the server ``chamvi api`` runs, on 127.0.0.1, a free port.

    async with serving(api) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            ...

The server runs as a task of the running loop, next to the worker the test started, so a test sees
exactly what a client of ``chamvi api`` sees: real sockets, real HTTP parsing, real status lines,
the same access log.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from temporalio.client import Client

from chamvi.client import ChamviClient
from chamvi.http import Token, create_api
from chamvi.http.server import bind, server
from chamvi.run_events import EventHub
from tests.polling import eventually

__all__ = ["bearer", "make_tokens", "runs_api", "serving"]


def make_tokens(**grants: Sequence[str]) -> dict[str, Token]:
    """Tokens with fresh random values, by id: ``make_tokens(admin=["*"], reader=["knowledge:read"])``."""
    return {
        token_id: Token(value=secrets.token_hex(16), id=token_id, permissions=tuple(permissions))
        for token_id, permissions in grants.items()
    }


def runs_api(
    tokens: dict[str, Token],
    client: Client,
    task_queue: str,
    *,
    agents: Collection[str] | None = None,
    base_path: str = "",
    events: EventHub | None = None,
) -> FastAPI:
    """The run routes (and the approvals page) in front of the workers of ``task_queue``.

    ``events``: the app's, when its worker runs in this process: the event stream carries its deltas.
    """
    return create_api(
        tokens=list(tokens.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue),
        agents=agents,
        base_path=base_path,
        events=events,
    )


def bearer(token: Token) -> dict[str, str]:
    return {"authorization": f"Bearer {token.value}"}


@asynccontextmanager
async def serving(app: FastAPI, *, log_level: str = "warning") -> AsyncIterator[str]:
    """Serves ``app`` until the block ends; yields its base URL, ``http://127.0.0.1:<port>``.

    ``log_level="info"`` lets the access log through.
    """
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    running = server(app, log_level=log_level)
    task = asyncio.create_task(running.serve(sockets=[sock]), name=f"uvicorn:{port}")

    async def started() -> bool | None:
        if running.started:
            return True
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("uvicorn stopped before it started")
        return None

    try:
        await eventually(started, f"uvicorn starting on port {port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        running.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()
