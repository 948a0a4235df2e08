"""One settings object, built at the entry points (worker, CLI) from the environment.

This module is the one place chamvi reads (and, for the app a CLI process loads, writes) the
environment: :class:`Settings` for what the entry points pass on, and a few readers of single
variables for code that needs one of them late, at first use (a provider's key, Hugging Face's
offline flag), so that setting the variable after import still counts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import overload
from urllib.parse import unquote

from chamvi.constants import DEFAULT_ATTACHMENT_MAX_BYTES, TASK_QUEUE
from chamvi.errors import ChamviError, ChamviValidationError
from chamvi.run_slots import DEFAULT_MAX_RUNS

DEFAULT_APP = "examples.support.app:app"
GITHUB_API_URL = "https://api.github.com"
SLACK_API_URL = "https://slack.com/api"


@dataclass(frozen=True)
class Settings:
    """Where Temporal is, which app to serve, where local state lives.

    ``temporal_address``/``temporal_namespace`` left as None fall back to Temporal's own
    configuration (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_PROFILE`` and the
    ``temporal.toml`` profiles), then to ``localhost:7233`` / ``default``.
    """

    temporal_address: str | None = None
    temporal_namespace: str | None = None
    task_queue: str = TASK_QUEUE
    app: str = DEFAULT_APP
    data: Path = Path(".chamvi")
    qdrant_url: str | None = None
    qdrant_prefix: str = "chamvi"
    knowledge_model: str | None = None
    otlp_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_ENDPOINT``: traces (and, without a Prometheus address, metrics) go there
    by OTLP over HTTP; unset, nothing is exported."""
    otlp_headers: tuple[tuple[str, str], ...] = ()
    """``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key=value``, values URL-encoded): sent with every
    export, e.g. a hosted backend's API key."""
    metrics_address: str | None = None
    """``CHAMVI_METRICS_ADDRESS`` (``host:port``): the worker's Prometheus endpoint, at ``/metrics``."""
    trace_content: bool = False
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: spans carry messages, tool arguments
    and results; off, they carry names, ids and counts only."""
    artifacts_url: str | None = None
    """``CHAMVI_ARTIFACTS_URL`` (``s3://bucket/prefix``): where artifacts live; unset, in
    ``<data>/artifacts``. obstore reads the endpoint and credentials from ``AWS_*`` variables."""
    attachment_max_bytes: int = DEFAULT_ATTACHMENT_MAX_BYTES
    """``CHAMVI_ATTACHMENT_MAX_BYTES``: the size limit per attachment of a dispatch."""
    no_channels: bool = False
    """``CHAMVI_NO_CHANNELS``: workers start none of the app's receiving channels (``start(ctx)``);
    runs still send through every channel."""
    schedule_min_interval: timedelta = timedelta(minutes=1)
    """``CHAMVI_SCHEDULE_MIN_INTERVAL`` (``90s``, ``15m``): the shortest gap between fires of a
    schedule created over HTTP, so one token cannot start a run a second."""
    max_runs: int = DEFAULT_MAX_RUNS
    """``CHAMVI_MAX_RUNS``: the most runs a worker process executes at once (``chamvi.run_slots``)."""
    knowledge_routes: bool | None = None
    """``CHAMVI_KNOWLEDGE_ROUTES``: whether the HTTP API serves the managed collections' routes;
    unset, as the app's ``ManagedRoutes`` says (on by default)."""
    knowledge_base_path: str | None = None
    """``CHAMVI_KNOWLEDGE_BASE_PATH``: where the managed routes are (``/knowledge`` by default)."""
    knowledge_body_limit: int | None = None
    """``CHAMVI_KNOWLEDGE_BODY_LIMIT``: the body limit of the managed routes, in bytes (1 MiB by
    default)."""
    tokens: str | None = field(default=None, repr=False)
    """``CHAMVI_TOKENS``: the HTTP API's bearer tokens, as JSON (``chamvi.http.tokens_from_env``)."""
    approval_secret: str | None = field(default=None, repr=False)
    """``CHAMVI_APPROVAL_SECRET``: the key approval tokens are signed with (``chamvi.approval_tokens``);
    every worker, API and CLI that issues or checks them needs the same one. Unset, the data
    folder's ``approval-secret`` (generated on first use by a worker or an API)."""
    public_url: str | None = None
    """``CHAMVI_PUBLIC_URL``: where people reach the HTTP API (base path included); approval requests
    sent through a channel link to its approvals page there. ``chamvi dev`` defaults to its own."""
    github_token: str | None = None
    """``GITHUB_TOKEN``: what replies on GitHub (``GitHubComments``) authenticate with."""
    github_api_url: str = GITHUB_API_URL
    """``GITHUB_API_URL``: GitHub's REST API (GitHub Enterprise Server: ``https://HOST/api/v3``)."""
    slack_bot_token: str | None = None
    """``SLACK_BOT_TOKEN``: the bot token (``xoxb-...``) replies on Slack (``SlackMessages``) post with."""
    slack_api_url: str = SLACK_API_URL
    """``SLACK_API_URL``: Slack's Web API."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from environment variables (``os.environ`` unless ``env`` is given).

        Unset or empty variables take the defaults.
        """
        env = os.environ if env is None else env
        return cls(
            temporal_address=env.get("TEMPORAL_ADDRESS") or None,
            temporal_namespace=env.get("TEMPORAL_NAMESPACE") or None,
            task_queue=env.get("CHAMVI_TASK_QUEUE") or TASK_QUEUE,
            app=env.get("CHAMVI_APP") or DEFAULT_APP,
            data=Path(env.get("CHAMVI_DATA") or ".chamvi"),
            qdrant_url=env.get("QDRANT_URL") or None,
            qdrant_prefix=env.get("CHAMVI_QDRANT_PREFIX") or "chamvi",
            knowledge_model=env.get("CHAMVI_KNOWLEDGE_MODEL") or None,
            otlp_endpoint=(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").rstrip("/") or None,
            otlp_headers=_headers(env, "OTEL_EXPORTER_OTLP_HEADERS"),
            metrics_address=env.get("CHAMVI_METRICS_ADDRESS") or None,
            trace_content=_flag(env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
            artifacts_url=env.get("CHAMVI_ARTIFACTS_URL") or None,
            attachment_max_bytes=_positive(env, "CHAMVI_ATTACHMENT_MAX_BYTES", DEFAULT_ATTACHMENT_MAX_BYTES),
            no_channels=_flag(env, "CHAMVI_NO_CHANNELS"),
            schedule_min_interval=_interval(env, "CHAMVI_SCHEDULE_MIN_INTERVAL", timedelta(minutes=1)),
            max_runs=_positive(env, "CHAMVI_MAX_RUNS", DEFAULT_MAX_RUNS, unit="runs", example="8"),
            knowledge_routes=_optional_flag(env, "CHAMVI_KNOWLEDGE_ROUTES"),
            knowledge_base_path=env.get("CHAMVI_KNOWLEDGE_BASE_PATH") or None,
            knowledge_body_limit=_positive(env, "CHAMVI_KNOWLEDGE_BODY_LIMIT", None),
            tokens=env.get("CHAMVI_TOKENS") or None,
            approval_secret=env.get("CHAMVI_APPROVAL_SECRET") or None,
            public_url=_url(env, "CHAMVI_PUBLIC_URL"),
            github_token=env.get("GITHUB_TOKEN") or None,
            github_api_url=(env.get("GITHUB_API_URL") or GITHUB_API_URL).rstrip("/"),
            slack_bot_token=env.get("SLACK_BOT_TOKEN") or None,
            slack_api_url=(env.get("SLACK_API_URL") or SLACK_API_URL).rstrip("/"),
        )

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with the given fields replaced; None keeps a field, so unset CLI options change nothing."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]


def openai_credentials(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (None when unset or empty), read when a client is made.

    Read at first use rather than into :class:`Settings`: an ``App`` (and its providers) is built
    at import, before any entry point has settings, and a key exported later must still count.
    """
    env = os.environ if env is None else env
    return env.get("OPENAI_API_KEY") or None, env.get("OPENAI_BASE_URL") or None


def hf_hub_offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids downloads (``1``, ``true``, ``yes``, ``on``, any case).

    Hugging Face's own flag, read with its own leniency (anything else is off), at the moment a
    model would be downloaded.
    """
    env = os.environ if env is None else env
    return (env.get("HF_HUB_OFFLINE") or "").strip().upper() in {"1", "TRUE", "YES", "ON"}


def publish_data_folder(data: Path) -> None:
    """Sets ``CHAMVI_DATA`` for the app this process loads (the example keeps its outbox there).

    A CLI process resolves ``--data`` before it imports the app, whose module may read the folder
    from the environment at import.
    """
    os.environ["CHAMVI_DATA"] = str(data)


def _headers(env: Mapping[str, str], name: str) -> tuple[tuple[str, str], ...]:
    """``key=value`` pairs separated by commas, as OpenTelemetry's exporters read them.

    Raises:
        ChamviValidationError: a pair without ``=`` or without a key, named so it can be fixed.
    """
    headers = []
    for pair in (env.get(name) or "").split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ChamviValidationError(
                f"{name} has {pair.strip()!r}: write key=value pairs separated by commas"
            )
        headers.append((unquote(key.strip()), unquote(value.strip())))
    return tuple(headers)


def _flag(env: Mapping[str, str], name: str) -> bool:
    """A boolean variable: ``true``/``1``/``yes`` (any case) is on, unset or empty is off.

    Raises:
        ChamviValidationError: any other value, so a typo does not silently leave the flag off.
    """
    value = (env.get(name) or "").strip().lower()
    if value in ("", "false", "0", "no"):
        return False
    if value in ("true", "1", "yes"):
        return True
    raise ChamviValidationError(f"{name}={env[name]!r} is not a boolean: use true or false")


def _url(env: Mapping[str, str], name: str) -> str | None:
    """An ``http(s)://`` address without its trailing slash; unset or empty is None.

    Raises:
        ChamviValidationError: anything else, so a link is never built on a typo.
    """
    raw = (env.get(name) or "").strip().rstrip("/")
    if not raw:
        return None
    if not raw.startswith(("http://", "https://")) or "#" in raw or "?" in raw:
        raise ChamviValidationError(
            f"{name}={raw!r} is not a base URL: use http(s)://host[:port][/base path], e.g. "
            "https://agents.example.com"
        )
    return raw


def _optional_flag(env: Mapping[str, str], name: str) -> bool | None:
    """A boolean variable that may be left unset (None: the code's own choice stands)."""
    return _flag(env, name) if (env.get(name) or "").strip() else None


@overload
def _positive(
    env: Mapping[str, str], name: str, default: int, *, unit: str = ..., example: str = ...
) -> int: ...
@overload
def _positive(
    env: Mapping[str, str], name: str, default: None, *, unit: str = ..., example: str = ...
) -> int | None: ...
def _positive(
    env: Mapping[str, str],
    name: str,
    default: int | None,
    *,
    unit: str = "bytes",
    example: str = "20971520",
) -> int | None:
    """A positive whole number (of bytes); unset or empty takes ``default`` (None: as the code says).

    Raises:
        ChamviValidationError: anything else, named so it can be fixed.
    """
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise ChamviValidationError(f"{name}={raw!r} is not a positive number of {unit}, e.g. {example}")
    return int(raw)


def _interval(env: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    """An interval such as ``90s`` or ``15m`` (a schedule's ``every``); unset or empty takes ``default``.

    Raises:
        ChamviValidationError: anything else, named so it can be fixed.
    """
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    from chamvi.schedules import parse_every  # Temporal's client: only when the variable is set

    try:
        return parse_every(raw)
    except ChamviError as error:
        raise ChamviValidationError(f"{name}={raw!r}: {error.message}") from None
