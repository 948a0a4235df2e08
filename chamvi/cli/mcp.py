"""``chamvi mcp``: the knowledge tools served to other agents over MCP (stdio or streamable HTTP).

A wiki folder (``--kb``) is opened in this process, as ``chamvi kb`` opens it; collections
(``--collection``) are searched through their workflows' ``search`` update, so the worker that holds
Qdrant searches and this process needs Temporal only (the embedded store allows one process per
folder, and that process is the worker).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
import uvicorn

from chamvi.cli._common import beside_dev_stack, connect_or_fail, data_option, temporal_options
from chamvi.cli.kb import _open, kb_dir_option, root_type_option
from chamvi.cli.knowledge import _require_collection
from chamvi.errors import ChamviError
from chamvi.http.auth import Token, required_tokens
from chamvi.knowledge.remote import CollectionSearch
from chamvi.knowledge.search import MAX_TOP_K
from chamvi.knowledge_store import KnowledgeStore
from chamvi.mcp.knowledge import allowed_hosts, knowledge_http_app, knowledge_server
from chamvi.settings import Settings

DEFAULT_MCP_PORT = 8765


@click.command("mcp")
@kb_dir_option("--kb", "kb_dir")
@root_type_option
@click.option(
    "--prefix",
    default="knowledge",
    show_default=True,
    help="With --kb: the wiki tools' names, <prefix>_read ... (with --collection too, not 'knowledge').",
)
@click.option(
    "--collection",
    "collections",
    multiple=True,
    metavar="NAME",
    help="Serve knowledge_search over this collection (repeatable); a worker must serve it.",
)
@click.option(
    "--write",
    is_flag=True,
    help="Also serve the wiki's tools that write (_create, _edit, _rewrite, _supersede, _log); "
    "over HTTP only to tokens with knowledge:write.",
)
@click.option(
    "--interactive",
    is_flag=True,
    help="Also serve knowledge_retire, which asks the person at the MCP client first (needs --kb, --write).",
)
@click.option(
    "--top-k", type=click.IntRange(1, MAX_TOP_K), default=5, show_default=True, help="Passages per search."
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a host that starts this command; http for streamable HTTP at /mcp.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="With --transport http: the address.")
@click.option(
    "--allowed-host",
    "hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="With --transport http: a Host header clients send (repeatable); needed with a --host beyond "
    "loopback, and every other Host is refused.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_MCP_PORT,
    show_default=True,
    help="With --transport http: the port.",
)
@data_option("The data folder of a running `chamvi dev`, whose Temporal it reaches without --address.")
@temporal_options()
def mcp(
    kb_dir: Path | None,
    root_type: str | None,
    prefix: str,
    collections: tuple[str, ...],
    write: bool,
    interactive: bool,
    top_k: int,
    transport: str,
    host: str,
    hosts: tuple[str, ...],
    port: int,
    data: Path,
    settings: Settings,
) -> None:
    """Serve the knowledge tools over MCP: a wiki's (--kb) and knowledge_search (--collection).

    With --transport stdio (the default) a host such as a desktop assistant starts this command and
    talks to it on stdin/stdout; with http it serves streamable HTTP at http://HOST:PORT/mcp to the
    bearer tokens of CHAMVI_TOKENS (knowledge:read; knowledge:write for the write tools). The wiki's
    write tools are served only with --write. Without --address (or TEMPORAL_ADDRESS), a `chamvi dev`
    running on the data folder (--data) is found by itself: an MCP host starts this command without
    the project's environment.
    """
    if kb_dir is None and not collections:
        raise click.ClickException(
            "nothing to serve: give --kb DIR (a wiki's tools), --collection NAME (knowledge_search), or both"
        )
    if interactive and kb_dir is None:
        raise click.ClickException("--interactive serves knowledge_retire, a wiki tool: give --kb DIR too")
    if interactive and not write:
        raise click.ClickException("--interactive serves knowledge_retire, a write tool: give --write too")
    tokens = _http_tokens(settings, host, hosts) if transport == "http" else []
    settings = beside_dev_stack(settings, data)
    store: KnowledgeStore | None = _open(kb_dir, root_type) if kb_dir is not None else None

    async def serve() -> None:
        search: CollectionSearch | None = None
        if collections:
            client = await connect_or_fail(settings)
            for name in collections:
                await _require_collection(client, settings, name)
            search = CollectionSearch(client, task_queue=settings.task_queue)
        try:
            server = knowledge_server(
                store,
                collections=collections,
                search=search,
                write=write,
                interactive=interactive,
                top_k=top_k,
                prefix=prefix,
            )
        except ChamviError as error:
            raise click.ClickException(error.message) from None
        if transport == "stdio":
            await server.run_stdio_async()
        else:
            application = knowledge_http_app(server, tokens=tokens, host=host, hosts=hosts)
            click.echo(f"chamvi mcp: streamable HTTP at http://{host}:{port}/mcp", err=True)
            config = uvicorn.Config(application, host=host, port=port, log_level="warning")
            await uvicorn.Server(config).serve()

    asyncio.run(serve())


def _http_tokens(settings: Settings, host: str, hosts: tuple[str, ...]) -> list[Token]:
    """The HTTP transport's tokens, after the host check: both fail before anything opens."""
    try:
        allowed_hosts(host, hosts)
        return required_tokens(
            settings.tokens,
            needed_by="the HTTP transport takes the HTTP API's bearer tokens (knowledge:read to read, "
            "knowledge:write to write)",
            example={"value": "<secret>", "id": "assistant", "permissions": ["knowledge:read"]},
        )
    except ChamviError as error:
        raise click.ClickException(error.message) from None
