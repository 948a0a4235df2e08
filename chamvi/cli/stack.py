"""The local stack: ``chamvi dev``, ``chamvi worker`` and ``chamvi check``.

``chamvi dev`` runs a Temporal dev server and a worker; ``chamvi check`` loads the app and reports
problems, starting nothing but the app's MCP servers (to list their tools, then stop them).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import click
from temporalio.service import RPCError

from chamvi._constants import TASK_QUEUE
from chamvi._dev import DEFAULT_PORT, DevServer, DevServerConfig
from chamvi._lifecycle import (
    EDGE_FOLDER,
    LOCAL_MODE_FOLDER,
    check_index,
    close_index,
    index_location,
    legacy_index,
    open_index,
)
from chamvi.app import App
from chamvi.cli._common import (
    F,
    api_port_option,
    app_option,
    build_settings,
    data_option,
    load_app_or_fail,
    refused,
    temporal_options,
    temporal_target,
)
from chamvi.cli._output import echo_err
from chamvi.cli._serving import log_to_terminal, managed_routes, serve_dev, serve_worker, telemetry_line
from chamvi.cli.skills import load_listings
from chamvi.errors import ChamviError, IndexUnavailableError, InvalidAppError
from chamvi.knowledge import KnowledgeCollection, Source
from chamvi.mcp import classify
from chamvi.schedules import describe_interval
from chamvi.settings import Settings, configured_providers, key_hosts, openai_credentials
from chamvi.skills.library import sources_of
from chamvi.telemetry._otel import exporting_traces


def max_runs_option(function: F) -> F:
    """``--max-runs``: the most runs the worker executes at once; unset, ``CHAMVI_MAX_RUNS`` (Settings)."""
    return click.option(
        "--max-runs",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Most runs this worker executes at once; a run waiting for a person frees its slot "
        "[env var: CHAMVI_MAX_RUNS; default: 4].",
    )(function)


def knowledge_route_options(function: F) -> F:
    """``--knowledge-routes/--no-knowledge-routes``, ``--knowledge-base-path``, ``--knowledge-body-limit``.

    Unset, the environment (``CHAMVI_KNOWLEDGE_ROUTES``, ``CHAMVI_KNOWLEDGE_BASE_PATH``,
    ``CHAMVI_KNOWLEDGE_BODY_LIMIT``, read by ``Settings``) decides, else the app's
    ``App(managed=ManagedRoutes(...))``.
    """
    function = click.option(
        "--knowledge-body-limit",
        type=click.IntRange(min=1),
        default=None,
        metavar="BYTES",
        help="Body limit of the managed collections' routes [env var: CHAMVI_KNOWLEDGE_BODY_LIMIT; "
        "default: the app's, else the API's, 1048576].",
    )(function)
    function = click.option(
        "--knowledge-base-path",
        default=None,
        metavar="PATH",
        help="Where the managed collections' routes are [env var: CHAMVI_KNOWLEDGE_BASE_PATH; "
        "default: the app's, else /knowledge].",
    )(function)
    return click.option(
        "--knowledge-routes/--no-knowledge-routes",
        default=None,
        help="Serve the managed collections' routes [env var: CHAMVI_KNOWLEDGE_ROUTES; default: the "
        "app's, else on].",
    )(function)


def with_knowledge_routes(
    settings: Settings, app: App, enabled: bool | None, base_path: str | None, body_limit: int | None
) -> Settings:
    """The settings with the ``--knowledge-*`` options on top, checked against the app's routes.

    Raises:
        click.ClickException: a base path or body limit the routes cannot take, before anything starts.
    """
    settings = settings.with_overrides(
        knowledge_routes=enabled, knowledge_base_path=base_path, knowledge_body_limit=body_limit
    )
    try:
        managed_routes(app, settings)
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    return settings


@click.command()
@app_option
@data_option("Folder for all local state: the Temporal database and log, the example's outbox.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="gRPC port."
)
@click.option(
    "--ui-port", type=click.IntRange(1, 65535), default=None, help="Web UI port [default: --port + 1000]."
)
@click.option(
    "--namespace", envvar="TEMPORAL_NAMESPACE", default="default", show_default=True, show_envvar=True
)
@click.option(
    "--task-queue", envvar="CHAMVI_TASK_QUEUE", default=TASK_QUEUE, show_default=True, show_envvar=True
)
@api_port_option
@knowledge_route_options
@max_runs_option
@click.option(
    "--verbose",
    is_flag=True,
    help="Show the HTTP API's access log here [default: in DATA/api-access.log].",
)
def dev(
    app_ref: str,
    data: Path,
    port: int,
    ui_port: int | None,
    namespace: str,
    task_queue: str,
    api_port: int,
    knowledge_routes: bool | None,
    knowledge_base_path: str | None,
    knowledge_body_limit: int | None,
    max_runs: int | None,
    verbose: bool,
) -> None:
    """Run a local Temporal dev server (SQLite in DATA, Web UI), a worker for the app and the HTTP API.

    The API's token comes from CHAMVI_TOKENS, else one with every permission is made and kept in
    DATA/api-token. The stack's addresses go to DATA/dev-stack.json while it runs, where the other
    commands find them (`runs watch`, `dispatch --follow`, `chat`, `mcp`): ports given here are given
    once. Ctrl-C (or SIGTERM) stops the worker, then the server; nothing is left running.
    """
    data = data.resolve()
    app = load_app_or_fail(app_ref)
    config = DevServerConfig(data=data, port=port, ui_port=ui_port, namespace=namespace)
    settings = with_knowledge_routes(
        build_settings(config.address, namespace, task_queue, app=app_ref, data=data, max_runs=max_runs),
        app,
        knowledge_routes,
        knowledge_base_path,
        knowledge_body_limit,
    )
    server = DevServer(config)
    log_to_terminal()
    try:
        with exporting_traces(settings, "chamvi-dev"):
            asyncio.run(serve_dev(server, settings, app, echo=echo_err, api_port=api_port, verbose=verbose))
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    finally:
        server.stop()
    echo_err("stopped")


@click.command()
@app_option
@data_option("Folder for local state: Qdrant Edge (unless QDRANT_URL), the example's outbox.")
@temporal_options()
@max_runs_option
def worker(app_ref: str, data: Path, settings: Settings, max_runs: int | None) -> None:
    """Run a worker for the app until SIGINT/SIGTERM; run as many replicas as you like.

    Several workers need a Qdrant server (QDRANT_URL): the embedded store (Qdrant Edge) allows one
    process per folder.
    """
    data = data.resolve()
    settings = settings.with_overrides(app=app_ref, data=data, max_runs=max_runs)
    app = load_app_or_fail(app_ref)
    log_to_terminal()

    def describe() -> str:
        return (
            f"worker for {app_ref} (agents: {', '.join(app.agents) or 'none'}; at most "
            f"{settings.max_runs} runs at once) on task queue "
            f"{settings.task_queue!r} at {temporal_target(settings)}, knowledge in "
            f"{index_location(settings)}.{telemetry_line(settings)} Ctrl-C to stop."
        )

    try:
        with exporting_traces(settings, "chamvi-worker"):
            asyncio.run(serve_worker(settings, app, echo=echo_err, describe=describe))
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    except RPCError as error:
        raise refused(settings, error) from None
    echo_err("stopped")


def _source_line(source: Source) -> str:
    path = getattr(source, "path", None)
    if isinstance(path, Path):
        with contextlib.suppress(ValueError):
            path = path.relative_to(Path.cwd())
        return f"{source.kind} {path}"
    return source.kind


def _collection_line(collection: KnowledgeCollection) -> str:
    sources = ", ".join(_source_line(source) for source in collection.sources)
    extra = f", resync every {describe_interval(collection.resync)}" if collection.resync is not None else ""
    trust = "" if collection.is_trusted else ", untrusted (a search taints the run)"
    return f"  collection {collection.name}: model {collection.model}, sources: {sources}{extra}{trust}"


def _shared_keys() -> list[str]:
    """A warning for each key variable two hosts get (``CHAMVI_PROVIDERS`` and the built-ins).

    One key for two hosts hands the one server's key to the other: an entry naming
    ``OPENAI_API_KEY`` for a third-party gateway sends OpenAI's key there.
    """
    return [
        f"{variable} is sent to {len(hosts)} hosts: "
        + ", ".join(
            f"{host} (provider{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)})"
            for host, names in sorted(hosts.items())
        )
        + ": give each host's key a variable of its own (api_key_env in CHAMVI_PROVIDERS)"
        for variable, hosts in sorted(key_hosts(configured_providers()).items())
        if len(hosts) > 1
    ]


def _needs_openai_key(ref: str) -> bool:
    return ref.startswith("openai/") and not any(openai_credentials())


def _check_store(app: App, data: Path, problems: list[str], warnings: list[str]) -> None:
    """Reads the knowledge store as a worker's boot does, never writing to it or embedding.

    A declared collection the store holds as a managed one fails a worker's boot, so it is a problem
    here too. The embedded store (Qdrant Edge) allows one process per folder: a folder a running
    worker holds is not read (that worker checked it as it started), which is a warning.
    """
    if not app.collections:
        return
    settings = build_settings(None, None, None, data=data.resolve())
    location = index_location(settings)
    try:
        if settings.qdrant_url or (settings.data / EDGE_FOLDER).is_dir():
            index = open_index(settings)
        elif (settings.data / LOCAL_MODE_FOLDER).is_dir():
            # read as an earlier version left it: the next worker carries it over to Qdrant Edge
            location = str(settings.data / LOCAL_MODE_FOLDER)
            index = legacy_index(settings)
        else:
            return  # nothing stored yet: the first worker creates it
    except IndexUnavailableError as error:
        warnings.append(f"the knowledge store was not read: {error.message}")
        return

    async def read() -> None:
        try:
            await check_index(app, index, location)
        finally:
            await close_index(index)

    try:
        asyncio.run(read())
    except (InvalidAppError, IndexUnavailableError) as error:
        problems.append(error.message)


def _check_mcp_servers(app: App, timeout: float, problems: list[str], lines: list[str]) -> None:
    """Starts (or reaches) each declared MCP server and lists its tools, as a run would.

    Each has ``timeout`` seconds (or its own ``timeout=``, if shorter); a server that cannot start,
    fails to answer or lacks a tool the app names is one problem line naming it. Every session is
    closed (a stdio server's process ends) before the command reports.
    """
    if not app.mcp_servers:
        return
    from chamvi.mcp._client import list_tools
    from chamvi.mcp._sessions import McpSessions

    async def listing() -> None:
        sessions = McpSessions()
        try:
            for server in app.mcp_servers.values():
                try:
                    async with asyncio.timeout(timeout):
                        tools = await list_tools(server, sessions)
                except TimeoutError:
                    problems.append(
                        f"MCP server {server.name!r} ({server.where}) did not list its tools within "
                        f"{timeout:g} s: is the command right, and does it speak MCP on stdio?"
                    )
                    continue
                except ChamviError as error:
                    problems.append(error.message)
                    continue
                guarded = [t.name for t in tools if classify(server, t.name, t.hints)[0].guard_when_tainted]
                extra = f", guarded once tainted: {', '.join(guarded)}" if guarded else ""
                lines.append(
                    f"  MCP server {server.name} ({server.where}): {len(tools)} tool(s): "
                    f"{', '.join(t.name for t in tools) or 'none'}{extra}"
                )
        finally:
            await sessions.close()

    asyncio.run(listing())


def _check_skills(app: App, data: Path, problems: list[str]) -> dict[str, list[str]]:
    """Each agent's skill names, loaded as a worker's boot loads them, recording and saving nothing.

    A bad skill is a problem: one line naming the file.
    """
    if not sources_of(app):
        return {}
    try:
        listings = load_listings(app, data, list(app.agents))
    except ChamviError as error:
        problems.append(error.message)
        return {}
    return {listing.agent: [s.name for s in listing.skills] for listing in listings}


@click.command()
@app_option
@data_option("Folder for local state, where the knowledge store (the embedded Qdrant Edge store) is read.")
@click.option(
    "--mcp/--no-mcp",
    "contact_mcp",
    default=True,
    show_default=True,
    help="Start each declared MCP server and list its tools.",
)
@click.option(
    "--mcp-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long each MCP server has to start and list its tools.",
)
def check(app_ref: str, data: Path, contact_mcp: bool, mcp_timeout: float) -> None:
    """Load the app and report problems.

    Loading checks the agents (models, tools, channels, MCP servers declared), their skills (each
    loaded and checked as a worker's boot does) and the knowledge collections (names declared once,
    embedding models that resolve, folder() paths that are directories, sources' own check()). The
    knowledge store (QDRANT_URL, else Qdrant's folder under --data) is read, never written: a
    declared collection it holds as a managed one is a problem. Each declared MCP server is started
    (a stdio command) or reached (a URL) and its tools listed, as a run would, then closed again
    (--no-mcp skips it): a wrong command is a problem naming the server. A key variable sent to two
    hosts (CHAMVI_PROVIDERS entries and the built-in openai and anthropic providers) is a warning.
    """
    app = load_app_or_fail(app_ref)
    problems: list[str] = []
    warnings: list[str] = _shared_keys()
    _check_store(app, data, problems, warnings)
    skills = _check_skills(app, data, problems)
    lines: list[str] = []
    for name, agent in app.agents.items():
        try:
            ref, _ = app.model_for(agent)
            app.spec(name)
        except Exception as error:
            problems.append(f"agent {name!r}: {error}")
            continue
        if _needs_openai_key(ref):
            warnings.append(
                f"agent {name!r} uses {ref!r} but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set"
            )
        effect_tools = [
            *((repr(t.name), t.effect) for t in agent.tools.values() if t.effect is not None),
            *(
                (f"{tool!r} of MCP server {server!r}", spec)
                for server in agent.mcp_servers
                for tool, spec in app.mcp_servers[server].effects.items()
            ),
        ]
        warnings.extend(
            f"agent {name!r}: effect tool {label} has no already_applied: a worker that dies after "
            "its side effect and before its result is recorded makes it run again"
            for label, spec in effect_tools
            if spec.already_applied is None
        )
        tools = ", ".join(
            f"{t.name}{' (effect)' if t.effect is not None else ''}" for t in agent.tools.values()
        )
        if agent.tool_factory is not None:
            tools = "built for each run by a tool factory"
        servers = "".join(
            f", the tools of MCP server {s} ({app.mcp_servers[s].where})" for s in agent.mcp_servers
        )
        own = f", skills: {', '.join(skills[name])}" if skills.get(name) else ""
        lines.append(f"  agent {name}: model {ref}, tools: {tools or 'none'}{servers}{own}")
    if not app.agents:
        problems.append("the app has no agents")
    for collection in app.collections.values():
        if _needs_openai_key(collection.model):
            warnings.append(
                f"collection {collection.name!r} uses {collection.model!r} but neither OPENAI_API_KEY nor "
                "OPENAI_BASE_URL is set"
            )
        lines.append(_collection_line(collection))
    for schedule in app.schedules.values():
        when = (
            f"cron {schedule.cron} ({schedule.timezone or 'UTC'})"
            if schedule.cron
            else f"every {schedule.every}"
        )
        lines.append(f"  schedule {schedule.id}: agent {schedule.agent}, {when}, overlap {schedule.overlap}")
    if contact_mcp:
        _check_mcp_servers(app, mcp_timeout, problems, lines)
    for warning in warnings:
        echo_err(f"warning: {warning}")
    for problem in problems:
        echo_err(f"problem: {problem}")
    if problems:
        raise click.ClickException(f"{app_ref}: {len(problems)} problem(s)")
    click.echo(
        f"{app_ref}: ok, {len(app.agents)} agent(s), {len(app.collections)} collection(s), "
        f"channels: {', '.join(app.channels) or 'none'}"
    )
    for line in lines:
        click.echo(line)
