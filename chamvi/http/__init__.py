"""The HTTP API (``chamvi api``): managed knowledge collections and runs, behind bearer tokens.

tokens = tokens_from_env(Settings.from_env().tokens)
api = build_api(app, client, store, tokens=tokens, knowledge_model=settings.knowledge_model)
await serve(api, host="0.0.0.0", port=3000)
"""

from chamvi.errors import InvalidTokensError
from chamvi.http.api import build_api, create_api
from chamvi.http.auth import Token, tokens_from_env
from chamvi.http.limits import DEFAULT_BODY_LIMIT
from chamvi.http.server import DEFAULT_PORT, serve, server

__all__ = [
    "DEFAULT_BODY_LIMIT",
    "DEFAULT_PORT",
    "InvalidTokensError",
    "Token",
    "build_api",
    "create_api",
    "serve",
    "server",
    "tokens_from_env",
]
