"""``chamvi api``: the HTTP API alone (managed collections and runs); workers run elsewhere."""

from __future__ import annotations

import asyncio

import click

from chamvi._lifecycle import close_index, open_index
from chamvi.approval_tokens import approval_tokens
from chamvi.artifacts import open_artifact_store
from chamvi.cli._common import (
    api_port_option,
    app_option,
    connect_or_fail,
    load_app_or_fail,
    temporal_options,
)
from chamvi.cli._output import echo_err
from chamvi.cli._serving import first_of, log_to_terminal, managed_routes, stop_on_signals
from chamvi.cli.stack import knowledge_route_options, with_knowledge_routes
from chamvi.errors import ChamviError
from chamvi.http import build_api
from chamvi.http.auth import required_tokens
from chamvi.http.process import listen
from chamvi.settings import Settings
from chamvi.telemetry._otel import exporting_traces


@click.command()
@app_option
@temporal_options()
@api_port_option
@click.option("--host", envvar="CHAMVI_API_HOST", default="127.0.0.1", show_default=True, show_envvar=True)
@knowledge_route_options
def api(
    app_ref: str,
    settings: Settings,
    api_port: int,
    host: str,
    knowledge_routes: bool | None,
    knowledge_base_path: str | None,
    knowledge_body_limit: int | None,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) until SIGINT/SIGTERM.

    Needs CHAMVI_TOKENS (bearer tokens and their permissions) and QDRANT_URL: the embedded store
    (Qdrant Edge) allows one process per folder, which a worker holds (`chamvi dev` serves the API beside its
    worker instead).
    """
    try:
        tokens = required_tokens(
            settings.tokens,
            needed_by="every route of the API needs a bearer token",
            example={"value": "<secret>", "id": "feeder", "permissions": ["knowledge:read", "runs:*"]},
        )
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    if not settings.qdrant_url:
        raise click.ClickException(
            "chamvi api needs QDRANT_URL: the embedded store allows one process per folder and the "
            "worker holds it (`chamvi dev` serves the API beside its worker)"
        )
    app = load_app_or_fail(app_ref)
    settings = with_knowledge_routes(
        settings.with_overrides(app=app_ref), app, knowledge_routes, knowledge_base_path, knowledge_body_limit
    )
    log_to_terminal()

    async def go() -> None:
        stop = asyncio.Event()
        with stop_on_signals(stop):
            api_socket = listen(host, api_port)
            index = open_index(settings)
            try:
                client = await connect_or_fail(settings, serving=True)
                application = build_api(
                    app,
                    client,
                    index,
                    tokens=tokens,
                    task_queue=settings.task_queue,
                    knowledge_model=settings.knowledge_model,
                    artifacts=open_artifact_store(settings),
                    attachment_max_bytes=settings.attachment_max_bytes,
                    schedule_min_interval=settings.schedule_min_interval,
                    managed_routes=managed_routes(app, settings),
                    approval_tokens=approval_tokens(settings),
                )
                echo_err(
                    f"HTTP API at {api_socket.url} (docs at {api_socket.url}/docs, "
                    f"approvals page at {api_socket.url}/ui). Ctrl-C to stop."
                )
                await first_of(api_socket.serve(application), stop.wait())
            finally:
                api_socket.sock.close()
                await close_index(index)

    try:
        with exporting_traces(settings, "chamvi-api"):
            asyncio.run(go())
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    echo_err("stopped")
