"""The FastAPI application: managed knowledge collections and runs, behind bearer tokens."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version

from fastapi import APIRouter, Depends, FastAPI, Security
from fastapi.security import HTTPBearer
from temporalio.client import Client

from chamvi._constants import DEFAULT_ATTACHMENT_MAX_BYTES, TASK_QUEUE
from chamvi._starters import request_sync
from chamvi.agent_revisions import ObjectRevisionStore
from chamvi.app import App
from chamvi.approval_tokens import ApprovalTokens
from chamvi.artifacts import ArtifactStore
from chamvi.client import ChamviClient
from chamvi.dynamic_agents import RuntimeAgents
from chamvi.http.agents_routes import AgentDirectory, ThroughWorkers, agent_check, agents_router
from chamvi.http.approvals_routes import approvals_router
from chamvi.http.artifacts_routes import artifacts_router, upload_body_limit
from chamvi.http.auth import AuthMiddleware, RoutePermissions, Token, principal
from chamvi.http.channels_routes import channels_router
from chamvi.http.conversations_routes import conversations_router
from chamvi.http.errors import CatchAllMiddleware, install_error_handlers
from chamvi.http.knowledge_routes import knowledge_router
from chamvi.http.limits import DEFAULT_BODY_LIMIT, BodyLimitMiddleware, FramingMiddleware
from chamvi.http.runs_routes import runs_router
from chamvi.http.schedules_routes import schedules_router
from chamvi.http.state_routes import state_router
from chamvi.http.ui import ui_router
from chamvi.knowledge.collections import ManagedRoutes
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.managed import ManagedCollections
from chamvi.run_events import EventHub
from chamvi.schedules import DEFAULT_MIN_INTERVAL
from chamvi.skills.library import SkillLibrary
from chamvi.state import StateStore
from chamvi.state.views import StateViews
from chamvi.webhooks import WebhookChannel
from chamvi.worker_state import AppRuntime

log = logging.getLogger(__name__)

_BEARER = HTTPBearer(
    auto_error=False,  # the middleware answers 401/403 before any route runs
    description="A token from CHAMVI_TOKENS: `Authorization: Bearer <value>`",
)


def _version() -> str:
    try:
        return version("chamvi-temporal")
    except PackageNotFoundError:
        return "0.0.0"


def _base(base_path: str) -> str:
    if base_path and (not base_path.startswith("/") or base_path.endswith("/") or "//" in base_path):
        raise ValueError(f"base_path {base_path!r} must be '' or start with '/' and not end with '/'")
    return base_path


def create_api(
    *,
    tokens: Sequence[Token],
    managed: ManagedCollections | None,
    runs: ChamviClient | None,
    body_limit: int = DEFAULT_BODY_LIMIT,
    base_path: str = "",
    agents: Collection[str] | None = None,
    events: EventHub | None = None,
    inbound: App | None = None,
    state: StateViews | None = None,
    schedule_min_interval: timedelta = DEFAULT_MIN_INTERVAL,
    managed_routes: ManagedRoutes | None = None,
    skills: SkillLibrary | None = None,
    agent_directory: AgentDirectory | None = None,
) -> FastAPI:
    """The HTTP API.

    Args:
        tokens: the bearer tokens (``tokens_from_env(Settings.from_env().tokens)``); none: every
            route answers 401.
        managed: the service behind ``/knowledge``; None serves no knowledge routes.
        runs: the client behind ``/runs``, ``/conversations`` and ``/schedules``; None serves none. With its
            ``approval_tokens``, ``/approvals/view`` and ``/approvals/answer`` take approval tokens
            (the token is the permission; see ``chamvi.http.approvals_routes``).
        body_limit: bodies over this many bytes answer 413 before anything parses them.
        base_path: a prefix for every route, the OpenAPI document and the docs (``/api``).
        agents: the agents the workers serve; a dispatch naming another answers 404 at once (without
            it, such a run is accepted and fails in the worker).
        events: this process's run events (a worker's ``AppRuntime.events``): with a worker in the
            same process, ``/runs/{id}/events`` streams the model's deltas too.
        inbound: the app whose webhook channels receive events at ``/channels/<name>/events``
            (signed by the channel's secret, not a token); needs ``runs``; an app without webhook
            channels serves no such route.
        state: the agents' state behind ``/state``; None serves no state routes.
        schedule_min_interval: the shortest gap between fires of a schedule created over HTTP
            (``CHAMVI_SCHEDULE_MIN_INTERVAL``), so one token cannot start a run a second.
        managed_routes: whether, where and with what body limit ``managed`` is served (by default
            on, at ``/knowledge``, within ``body_limit``).
        skills: the agents' skills behind ``/agents/{name}/skills``; None serves no such route.
        agent_directory: the agents behind ``/agents``, and where a dispatch of an agent outside
            ``agents`` is checked (agents defined at runtime): the API's own view of the revision
            store (``RuntimeAgents``); by default, with ``runs``, the workers (``ThroughWorkers``),
            and a dispatch outside ``agents`` answers 404 as before.

    Routes are below ``<base_path>/knowledge``, ``<base_path>/runs``, ``<base_path>/conversations``,
    ``<base_path>/schedules``, ``<base_path>/agents`` and ``<base_path>/state``; ``/openapi.json`` and
    ``/docs`` (below the base path too) need no token, nor does the approvals page ``/ui`` (served with
    the run routes), which asks a person for one.
    """
    base = _base(base_path)
    if body_limit < 1:
        raise ValueError(f"body_limit must be at least 1 byte, not {body_limit}")
    api = FastAPI(
        title="chamvi",
        version=_version(),
        description="Managed knowledge collections and durable agent runs over HTTP. Every route "
        "needs `Authorization: Bearer <token>` with the permission named by its `x-permission`.",
        openapi_url=f"{base}/openapi.json",
        docs_url=f"{base}/docs",
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        redirect_slashes=False,
        generate_unique_id_function=lambda route: route.name,
        # FastAPI's own OpenTelemetry: a server span per request on the installed tracer provider
        # (continuing the caller's traceparent, so a dispatch's run joins its trace), but no log
        # records, which would carry a refused body's input values (see chamvi.telemetry._otel)
        telemetry={"logs": False},
    )
    routers: list[APIRouter] = []
    routes = managed_routes or ManagedRoutes()
    path_limits: dict[str, int] = {}
    if managed is not None and routes.enabled:
        routers.append(knowledge_router(managed, routes.base_path))
        # every managed route is below /collections, also when base_path is ""
        path_limits[f"{base}{routes.base_path}/collections"] = routes.max_body_bytes or body_limit
    upload_limits: dict[str, int] = {}
    check_agent = agent_check(agents, agent_directory)
    if runs is not None and runs.artifacts is not None:
        # before the JSON dispatch: it takes only multipart bodies, the JSON route all others
        routers.append(artifacts_router(runs, check_agent))
        upload_limits[f"{base}/runs"] = upload_body_limit(runs, body_limit)
    if runs is not None:
        if events is not None:
            events.keep_recent_deltas()
        routers.append(runs_router(runs, check_agent, events))
        schedule_check = check_agent if agents is not None else None
        routers.append(schedules_router(runs, schedule_check, schedule_min_interval))
        agent_directory = agent_directory or ThroughWorkers(runs)
        routers.append(
            conversations_router(runs, agents, events, check_agent=check_agent, directory=agent_directory)
        )
    if agent_directory is not None or skills is not None:
        routers.append(agents_router(agent_directory, skills))
    if state is not None:
        routers.append(state_router(state))
    permissions = RoutePermissions()
    for router in routers:
        permissions.add_router(router, prefix=base)
        api.include_router(router, prefix=base, dependencies=[Security(_BEARER), Depends(principal)])
    if (
        inbound is not None
        and runs is not None
        and any(isinstance(c, WebhookChannel) for c in inbound.channels.values())
    ):
        # authenticated by each channel's signature, not by a bearer token: no permission, no Security
        api.include_router(channels_router(inbound.channels, inbound.agents, runs), prefix=base)
    if runs is not None and runs.approval_tokens is not None:
        # the approval token in the body is the permission: no bearer token needed, none required
        api.include_router(approvals_router(runs, tokens), prefix=base)
    if runs is not None:
        # the approvals page needs no token to load; it reads the run routes with the one typed into it
        api.include_router(ui_router(base))
    install_error_handlers(api)
    if not tokens:
        log.warning("no tokens (CHAMVI_TOKENS is empty): every route answers 401")
    # the last added runs first: catch everything, refuse ambiguous framing, then authenticate,
    # then limit the body
    api.add_middleware(
        BodyLimitMiddleware, limit=body_limit, upload_limits=upload_limits, path_limits=path_limits
    )
    api.add_middleware(AuthMiddleware, routes=permissions, tokens=list(tokens))
    api.add_middleware(FramingMiddleware)
    api.add_middleware(CatchAllMiddleware)
    return api


def build_api(
    app: App,
    client: Client,
    store: KnowledgeIndex,
    *,
    tokens: Sequence[Token],
    task_queue: str = TASK_QUEUE,
    knowledge_model: str | None = None,
    body_limit: int = DEFAULT_BODY_LIMIT,
    base_path: str = "",
    artifacts: ArtifactStore | None = None,
    attachment_max_bytes: int = DEFAULT_ATTACHMENT_MAX_BYTES,
    schedule_min_interval: timedelta = DEFAULT_MIN_INTERVAL,
    managed_routes: ManagedRoutes | None = None,
    runtime: AppRuntime | None = None,
    approval_tokens: ApprovalTokens | None = None,
) -> FastAPI:
    """``create_api`` for an app, as ``chamvi api`` and ``chamvi dev`` serve it.

    Args:
        app: the app whose agents ``/runs`` dispatches and whose collections ``/knowledge`` shows.
        client: the Temporal client runs are started and sync requests sent with.
        store: the Qdrant knowledge index the collections live in.
        tokens: the bearer tokens; none: every route answers 401.
        task_queue: the workers' task queue, where runs and passes are started.
        knowledge_model: ``CHAMVI_KNOWLEDGE_MODEL``; else the app's ``embedding_model`` is the managed
            collections' default model.
        body_limit: bodies over this many bytes answer 413 before anything parses them.
        base_path: a prefix for every route, the OpenAPI document and the docs (``/api``).
        artifacts: the artifact store the workers use; with it, ``POST /runs`` takes files and the
            artifact routes are served.
        attachment_max_bytes: the size limit per attachment (413 over it).
        schedule_min_interval: the shortest gap between fires of a schedule created over HTTP.
        managed_routes: how the managed collections are served; by default the app's
            ``App(managed=...)``.
        runtime: the runtime of a worker in the same process (``chamvi dev``: ``plugin.runtime``),
            whose event hub streams the model's deltas on ``/runs/{id}/events``; without one the
            events come from the runs' histories alone. Its agents serve ``/agents``; without it,
            the revisions of runtime agents are read from ``artifacts`` (the store the workers
            share), else asked of the workers.
        approval_tokens: the workers' approval secret (``approval_tokens(settings)``): with it, the
            API answers approvals by token.
    """
    skill_copies = artifacts or ArtifactStore.memory()
    managed = ManagedCollections(
        store,
        app.embedders,
        default_model=knowledge_model or app.embedding_model,
        declared=app.collections,
        request_sync=lambda name: request_sync(client, task_queue, name),
    )
    runs = ChamviClient(
        client,
        task_queue=task_queue,
        artifacts=artifacts,
        attachment_max_bytes=attachment_max_bytes,
        approval_tokens=approval_tokens,
    )
    directory: AgentDirectory
    if runtime is not None:
        directory = runtime.agents
    elif artifacts is not None:
        directory = RuntimeAgents(app, ObjectRevisionStore(artifacts.store, artifacts.location))
    else:
        directory = ThroughWorkers(runs)
    return create_api(
        tokens=tokens,
        managed=managed,
        runs=runs,
        body_limit=body_limit,
        base_path=base_path,
        agents=list(app.agents),
        events=runtime.events if runtime is not None else None,
        inbound=app,
        state=StateViews(
            app,
            StateStore(store.client, store.prefix),
            directory if isinstance(directory, RuntimeAgents) else None,
        ),
        schedule_min_interval=schedule_min_interval,
        managed_routes=managed_routes or app.managed,
        # a worker's own in `chamvi dev`; `chamvi api` loads the skills itself, from the same store
        skills=runtime.skills if runtime is not None else SkillLibrary(app, lambda: skill_copies),
        agent_directory=directory,
    )
