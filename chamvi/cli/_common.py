"""What the commands share: options, the settings they build, and connecting to Temporal.

The Temporal, app and JSON options live here, and connection failures become one-line errors.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from chamvi._constants import DEFAULT_API_PORT, TASK_QUEUE
from chamvi.errors import ChamviError, RunNotFoundError
from chamvi.settings import DEFAULT_APP, Settings

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.service import RPCError

    from chamvi.app import App
    from chamvi.approval_tokens import ApprovalTokens
    from chamvi.client import ChamviClient

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

POLL_SECONDS = 0.5


# -- options ------------------------------------------------------------------------------------------


def temporal_options() -> Callable[[Callable[..., T]], Callable[..., T]]:
    """``--address``, ``--namespace``, ``--task-queue``, read from the same env vars as Temporal's tools.

    ``--address`` means what it means to the ``temporal`` CLI, the server's address, on every command
    (``--temporal-address`` is the same option). The command gets them as ``settings``: the
    environment's settings with these on top.
    """

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(function)
        def command(
            *args: Any, temporal_address: str | None, namespace: str | None, task_queue: str, **kwargs: Any
        ) -> T:
            # a `chamvi dev` on the data folder answers for the address nothing else gave
            settings = build_settings(temporal_address, namespace, task_queue)
            settings = beside_dev_stack(settings, settings.data)
            return function(*args, settings=settings, **kwargs)

        with_options = click.option(
            "--task-queue",
            envvar="CHAMVI_TASK_QUEUE",
            default=TASK_QUEUE,
            show_default=True,
            show_envvar=True,
            help="Task queue the chamvi workers poll.",
        )(command)
        with_options = click.option(
            "--namespace",
            envvar="TEMPORAL_NAMESPACE",
            show_envvar=True,
            help="Temporal namespace [default: Temporal's profile, else 'default'].",
        )(with_options)
        return click.option(
            "--address",
            "--temporal-address",
            "temporal_address",
            envvar="TEMPORAL_ADDRESS",
            show_envvar=True,
            metavar="HOST:PORT",
            help="Temporal frontend [default: the `chamvi dev` running on CHAMVI_DATA, else Temporal's "
            "profile, else localhost:7233].",
        )(with_options)

    return decorate


def app_option(function: F) -> F:
    """``--app MODULE:ATTR``, read from ``CHAMVI_APP``."""
    return click.option(
        "--app",
        "app_ref",
        envvar="CHAMVI_APP",
        default=DEFAULT_APP,
        show_default=True,
        show_envvar=True,
        metavar="MODULE:ATTR",
        help="The chamvi App to serve.",
    )(function)


def api_port_option(function: F) -> F:
    """``--api-port``, read from ``CHAMVI_API_PORT``: one option so ``chamvi api`` and ``dev`` agree."""
    return click.option(
        "--api-port",
        type=click.IntRange(0, 65535),
        envvar="CHAMVI_API_PORT",
        default=DEFAULT_API_PORT,
        show_default=True,
        show_envvar=True,
        help="Port of the HTTP API.",
    )(function)


def data_option(help_text: str) -> Callable[[F], F]:
    """``--data``, read from ``CHAMVI_DATA``: the one folder for local state."""
    return click.option(
        "--data",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="CHAMVI_DATA",
        default=Path(".chamvi"),
        show_default=True,
        show_envvar=True,
        help=help_text,
    )


def json_option(help_text: str = "Print machine-readable JSON.") -> Callable[[F], F]:
    """``--json`` (the ``as_json`` flag)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def build_settings(
    temporal_address: str | None, namespace: str | None, task_queue: str | None, **extra: Any
) -> Settings:
    """The settings from the environment, with what the command line gave on top."""
    try:
        settings = Settings.from_env()
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    return settings.with_overrides(
        temporal_address=temporal_address, temporal_namespace=namespace, task_queue=task_queue, **extra
    )


def beside_dev_stack(settings: Settings, data: Path) -> Settings:
    """The settings, with the address, namespace and task queue of a ``chamvi dev`` running on ``data``.

    Only where nothing else chose them: an address given (``--address``, ``TEMPORAL_ADDRESS``) wins,
    and so do a namespace and a task queue other than the defaults.
    """
    if settings.temporal_address is not None:
        return settings
    from chamvi._dev import read_stack

    stack = read_stack(data.resolve())
    if stack is None:
        return settings
    return settings.with_overrides(
        temporal_address=stack.get("address"),
        temporal_namespace=settings.temporal_namespace or stack.get("namespace"),
        task_queue=stack.get("task_queue") if settings.task_queue == TASK_QUEUE else None,
    )


# -- connecting ---------------------------------------------------------------------------------------


def temporal_target(settings: Settings) -> str:
    """The address a connection goes to, for messages."""
    if settings.temporal_address:
        return settings.temporal_address
    from temporalio.envconfig import ClientConfig

    try:
        return str(ClientConfig.load_client_connect_config().get("target_host") or "localhost:7233")
    except Exception:  # a broken profile file: runtime.connect reports it
        return "localhost:7233"


def _unreachable(settings: Settings) -> click.ClickException:
    return click.ClickException(
        f"cannot reach Temporal at {temporal_target(settings)}: start it with `chamvi dev` or set "
        "TEMPORAL_ADDRESS"
    )


def refused(settings: Settings, error: RPCError) -> click.ClickException:
    """The one-line error for a call Temporal answered with an error."""
    return click.ClickException(f"Temporal at {temporal_target(settings)} refused: {error.message}")


async def connect_or_fail(settings: Settings, *, serving: bool = False) -> Client:
    """Connects to Temporal; an unreachable server is a one-line error that names the fix.

    ``serving``: a worker or the API, which exports telemetry (see ``chamvi._connection.connect``).
    """
    from chamvi._connection import connect

    try:
        return await connect(settings, serving=serving)
    except RuntimeError as error:
        if "connect" in str(error).lower():
            raise _unreachable(settings) from None
        raise


def run_with_client(
    settings: Settings,
    operation: Callable[[ChamviClient], Awaitable[T]],
    *,
    artifacts: bool = False,
    approval_tokens: bool = False,
) -> T:
    """Connects, runs ``operation`` with a ChamviClient, and turns failures into one-line errors.

    ``artifacts``: the client gets the settings' artifact store (attachments, listings); other
    commands leave the data folder untouched. ``approval_tokens``: the client checks approval tokens
    with the workers' secret, which must be there already (a CLI never makes one).
    """
    # Imported here so that `chamvi --help` and the app commands do not load the client.
    from temporalio.service import RPCError, RPCStatusCode

    from chamvi.artifacts import open_artifact_store
    from chamvi.client import ChamviClient

    tokens = _approval_tokens(settings) if approval_tokens else None

    async def go() -> T:
        client = await connect_or_fail(settings)
        store = open_artifact_store(settings) if artifacts else None
        chamvi = ChamviClient(
            client,
            task_queue=settings.task_queue,
            artifacts=store,
            attachment_max_bytes=settings.attachment_max_bytes,
            approval_tokens=tokens,
        )
        return await operation(chamvi)

    try:
        return asyncio.run(go())
    except RunNotFoundError as error:
        namespace = settings.temporal_namespace or "default"
        raise click.ClickException(
            f"{error.message} in namespace {namespace!r} at {temporal_target(settings)}"
        ) from None
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    except RPCError as error:
        if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise _unreachable(settings) from None
        raise refused(settings, error) from None


def _approval_tokens(settings: Settings) -> ApprovalTokens:
    from chamvi.approval_tokens import SECRET_FILE
    from chamvi.approval_tokens import approval_tokens as load_approval_tokens

    try:
        tokens = load_approval_tokens(settings, create=False)
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    if tokens is None:
        raise click.ClickException(
            f"no approval secret to check the token with: set CHAMVI_APPROVAL_SECRET to the workers' "
            f"secret, or CHAMVI_DATA to the data folder that holds {SECRET_FILE!r} "
            f"(not {str(settings.data)!r})"
        )
    return tokens


def load_app_or_fail(ref: str) -> App:
    """Loads the app ``ref`` names; any failure, the user's module raising included, is one line."""
    from chamvi.runtime import load_app

    try:
        return load_app(ref)
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    except Exception as error:  # the user's module failed while importing
        raise click.ClickException(f"importing app {ref!r} raised {type(error).__name__}: {error}") from None
