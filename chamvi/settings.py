"""One settings object, built at the entry points (worker, CLI) from the environment.

This module is the one place chamvi reads (and, for the app a CLI process loads, writes) the
environment: :class:`Settings` for what the entry points pass on, and a few readers of single
variables for code that needs one of them late, at first use (a provider's key, Hugging Face's
offline flag), so that setting the variable after import still counts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, overload
from urllib.parse import unquote, urlsplit

from chamvi._constants import DEFAULT_ATTACHMENT_MAX_BYTES, TASK_QUEUE
from chamvi._run_slots import DEFAULT_MAX_RUNS
from chamvi.errors import ChamviError, ChamviValidationError

DEFAULT_APP = "examples.support.app:app"
GITHUB_API_URL = "https://api.github.com"
SLACK_API_URL = "https://slack.com/api"

PROVIDERS_VARIABLE = "CHAMVI_PROVIDERS"
_PROVIDER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROVIDER_KEYS = ("api", "api_key_env", "base_url", "stream", "timeout")
_PROVIDERS_EXAMPLE = '{"ollama": {"base_url": "http://localhost:11434/v1"}}'
OPENAI_API_URL = "https://api.openai.com/v1"
ANTHROPIC_API_URL = "https://api.anthropic.com"
OWN_SECRET_PREFIX = "CHAMVI_"
OWN_SECRETS = ("GITHUB_TOKEN", "SLACK_BOT_TOKEN")
"""What a provider's ``api_key_env`` may not name besides ``CHAMVI_*``: the tokens chamvi itself
replies with. Every ``CHAMVI_`` variable is refused, not a list of them: the approval secret, the API
tokens, a webhook secret an app reads (``CHAMVI_TICKETS_SECRET``), and any chamvi adds later."""


@dataclass(frozen=True)
class ProviderConfig:
    """One named model provider of ``CHAMVI_PROVIDERS``: its refs are ``<name>/<model id>``.

    Attributes:
        name: the provider's name, before the slash of its refs.
        api: ``openai`` (an OpenAI-compatible endpoint, the default) or ``anthropic`` (the
            Messages API: another key, a gateway).
        base_url: the endpoint (required for ``openai``; for ``anthropic``, else
            ``ANTHROPIC_BASE_URL`` or Anthropic's API).
        api_key_env: the variable holding the key, read when the first call is made; unset, an
            ``openai`` endpoint gets none (a placeholder) and ``anthropic`` reads ``ANTHROPIC_API_KEY``.
        stream: whether answers are streamed.
        timeout: seconds one HTTP request may take (110 s by default).
    """

    name: str
    api: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    api_key_env: str | None = None
    stream: bool = True
    timeout: float | None = None


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
    """``CHAMVI_MAX_RUNS``: the most runs a worker process executes at once (``chamvi._run_slots``)."""
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
    providers: tuple[ProviderConfig, ...] = ()
    """``CHAMVI_PROVIDERS``: named model providers, as a JSON object (:func:`parse_providers`); an
    App reads the variable itself when it is built (:func:`configured_providers`), and an entry
    replaces a provider of the same name the code gives."""
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
            providers=parse_providers(env.get(PROVIDERS_VARIABLE)),
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


def anthropic_credentials(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` (None when unset or empty), as the SDK reads them.

    Read when a client is made, like :func:`openai_credentials`.
    """
    env = os.environ if env is None else env
    return env.get("ANTHROPIC_API_KEY") or None, env.get("ANTHROPIC_BASE_URL") or None


def key_hosts(
    configs: Iterable[ProviderConfig], env: Mapping[str, str] | None = None
) -> dict[str, dict[str, list[str]]]:
    """Where each key variable is sent: variable, then host, then the providers sending it there.

    The built-in ``openai`` and ``anthropic`` providers (unless an entry of ``configs`` replaces
    one) send ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` to their base URL variable, else their
    company's API; an ``openai`` entry sends its ``api_key_env`` (none when unset) to its
    ``base_url``; an ``anthropic`` entry its ``api_key_env``, else ``ANTHROPIC_API_KEY``, to its
    ``base_url``, else ``ANTHROPIC_BASE_URL``, else Anthropic's API.
    """
    env = os.environ if env is None else env
    _, openai_url = openai_credentials(env)
    _, anthropic_url = anthropic_credentials(env)
    sends: list[tuple[str, str, str]] = []
    named: set[str] = set()
    for config in configs:
        named.add(config.name)
        if config.api == "anthropic":
            url = config.base_url or anthropic_url or ANTHROPIC_API_URL
            sends.append((config.name, config.api_key_env or "ANTHROPIC_API_KEY", url))
        elif config.api_key_env is not None and config.base_url is not None:
            sends.append((config.name, config.api_key_env, config.base_url))
    if "openai" not in named:
        sends.append(("openai", "OPENAI_API_KEY", openai_url or OPENAI_API_URL))
    if "anthropic" not in named:
        sends.append(("anthropic", "ANTHROPIC_API_KEY", anthropic_url or ANTHROPIC_API_URL))
    hosts: dict[str, dict[str, list[str]]] = {}
    for provider, variable, url in sends:
        host = (urlsplit(url).hostname or url).lower()
        hosts.setdefault(variable, {}).setdefault(host, []).append(provider)
    return hosts


def read_variable(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The variable ``name`` (None when unset or empty): a provider's ``api_key_env``, read at first use."""
    env = os.environ if env is None else env
    return env.get(name) or None


def configured_providers(env: Mapping[str, str] | None = None) -> tuple[ProviderConfig, ...]:
    """``CHAMVI_PROVIDERS`` as it is now, read when an App is built (it may be built at import).

    Raises:
        ChamviValidationError: the variable is malformed, naming the entry and how to fix it.
    """
    env = os.environ if env is None else env
    return parse_providers(env.get(PROVIDERS_VARIABLE))


def provider_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a model provider, or None."""
    if isinstance(name, str) and _PROVIDER_NAME.fullmatch(name):
        return None
    return (
        f"provider name {name!r} must be 1-64 lowercase letters, digits, '.', '_' or '-', starting with "
        "a letter or digit (refs are '<provider>/<model id>')"
    )


def parse_providers(raw: str | None, variable: str = PROVIDERS_VARIABLE) -> tuple[ProviderConfig, ...]:
    """Named providers from JSON such as ``{"ollama": {"base_url": "http://localhost:11434/v1"}}``.

    Each entry takes ``base_url``, ``api_key_env``, ``api`` (``openai`` or ``anthropic``),
    ``stream`` and ``timeout``; keys themselves never go in the variable, only the name of the one
    that holds each. Unset or empty is no providers.

    Raises:
        ChamviValidationError: not a JSON object, or an entry that cannot work, named with its fix.
    """
    if not (raw or "").strip():
        return ()
    try:
        data = json.loads(raw or "")
    except json.JSONDecodeError as error:
        raise ChamviValidationError(
            f"{variable} is not JSON ({error.msg} at character {error.pos}): give an object such as "
            f"{_PROVIDERS_EXAMPLE}"
        ) from None
    if not isinstance(data, dict):
        raise ChamviValidationError(
            f"{variable} must be a JSON object of providers by name, such as {_PROVIDERS_EXAMPLE}"
        )
    return tuple(_provider_config(variable, name, entry) for name, entry in data.items())


def _provider_config(variable: str, name: str, entry: Any) -> ProviderConfig:
    where = f"{variable}: provider {name!r}"
    problem = provider_name_problem(name)
    if problem is not None:
        raise ChamviValidationError(f"{variable}: {problem}")
    if not isinstance(entry, dict):
        raise ChamviValidationError(f'{where} must be an object such as {{"base_url": "http://..."}}')
    unknown = sorted(set(entry) - set(_PROVIDER_KEYS))
    if unknown:
        secret = " (keys go in a variable of their own, named by api_key_env)" if "api_key" in unknown else ""
        raise ChamviValidationError(
            f"{where} has unknown field {unknown[0]!r}{secret}: its fields are "
            + ", ".join(repr(k) for k in _PROVIDER_KEYS)
        )
    api = entry.get("api", "openai")
    if api not in ("openai", "anthropic"):
        raise ChamviValidationError(f"{where}: api {api!r} must be 'openai' or 'anthropic'")
    base_url = entry.get("base_url")
    if base_url is None and api == "openai":
        raise ChamviValidationError(
            f'{where} has no base_url: give the endpoint, e.g. "http://localhost:11434/v1"'
        )
    if base_url is not None and (
        not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    ):
        raise ChamviValidationError(f"{where}: base_url {base_url!r} must be an http:// or https:// URL")
    key_env = entry.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not _VARIABLE_NAME.fullmatch(key_env)):
        raise ChamviValidationError(
            f'{where}: api_key_env {key_env!r} must name an environment variable, e.g. "OLLAMA_API_KEY"'
        )
    if key_env is not None and (key_env.upper().startswith(OWN_SECRET_PREFIX) or key_env in OWN_SECRETS):
        raise ChamviValidationError(
            f"{where}: api_key_env {key_env!r} names one of chamvi's own variables, which never go to a "
            f"model provider (no {OWN_SECRET_PREFIX}* variable, nor {', '.join(OWN_SECRETS)}): put the "
            'key in a variable of its own, e.g. "OLLAMA_API_KEY"'
        )
    stream = entry.get("stream", True)
    if not isinstance(stream, bool):
        raise ChamviValidationError(f"{where}: stream {stream!r} must be true or false")
    timeout = entry.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise ChamviValidationError(f"{where}: timeout {timeout!r} must be a positive number of seconds")
    return ProviderConfig(
        name=name,
        api=api,
        base_url=base_url,
        api_key_env=key_env,
        stream=stream,
        timeout=float(timeout) if timeout is not None else None,
    )


def hf_hub_offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids downloads (``1``, ``true``, ``yes``, ``on``, any case).

    Hugging Face's own flag, read with its own leniency (anything else is off), at the moment a
    model would be downloaded.
    """
    env = os.environ if env is None else env
    return (env.get("HF_HUB_OFFLINE") or "").strip().upper() in {"1", "TRUE", "YES", "ON"}


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
