"""Serving the API in a process of its own (``chamvi api``) or beside a worker (``chamvi dev``)."""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI

from chamvi.errors import ApiPortError
from chamvi.http.auth import Token, tokens_from_env
from chamvi.http.server import bind, server


@dataclass
class ApiSocket:
    """The API's listening socket, bound before anything starts, so a taken port fails at once."""

    sock: socket.socket
    url: str

    async def serve(self, api: FastAPI, *, access_log: Path | None = None) -> None:
        """Serves ``api`` on this socket until the server is told to exit.

        ``access_log``: a file for the access log lines instead of the terminal.
        """
        await server(api, access_log=access_log).serve(sockets=[self.sock])


def listen(host: str, port: int) -> ApiSocket:
    """Binds the API's socket now, so a port in use fails before a worker or a dev server starts.

    Raises:
        ApiPortError: the address cannot be bound (most often: the port is taken).
    """
    try:
        sock = bind(host, port)
    except OSError as error:
        raise ApiPortError(
            f"the API cannot listen on {host}:{port} ({error.strerror}): pass another --api-port"
        ) from None
    shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
    return ApiSocket(sock=sock, url=f"http://{shown}:{sock.getsockname()[1]}")


def dev_tokens(data: Path, configured: str | None) -> tuple[list[Token], str | None]:
    """The API's tokens: ``configured`` when set, else one all-permissions token kept in DATA/api-token.

    ``configured`` is ``CHAMVI_TOKENS`` (``Settings.tokens``); the generated token is for a laptop.

    Returns the tokens and the generated value (None when the tokens came from the environment).
    """
    if configured:
        return tokens_from_env(configured), None
    path = data / "api-token"
    value = path.read_text().strip() if path.exists() else ""
    if not value:
        value = secrets.token_hex(24)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
        path.chmod(0o600)
    return [Token(value=value, id="dev", permissions=("*",))], value
