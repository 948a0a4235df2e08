"""Following a run in the terminal: ``chamvi runs watch`` and ``chamvi dispatch --follow``.

The events come from the HTTP API's event stream when one is there (``chamvi dev`` runs the worker
and the API in one process, so its stream carries the model's text as it is written), else straight
from Temporal (``ChamviClient.events``: steps and approvals, but no live text, which only the
worker's process sees).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from chamvi._constants import DEFAULT_API_PORT
from chamvi.cli._common import api_port_option
from chamvi.cli._output import dump, echo_err, short
from chamvi.run_events import RUN_DELTA, RunEvent

if TYPE_CHECKING:
    import httpx

    from chamvi.client import ChamviClient

T = TypeVar("T")

RECONNECTS = 5
"""How many times a broken event stream is resumed (``Last-Event-ID``) before giving up."""


@dataclass(frozen=True)
class Api:
    """Where the HTTP API is, and the token to read runs with."""

    url: str
    token: str


def api_options(function: Callable[..., T]) -> Callable[..., T]:
    """``--api``, ``--token`` and ``--api-port``: where to follow a run from; the command gets ``api``."""

    @functools.wraps(function)
    def command(*args: Any, api_url: str | None, token: str | None, api_port: int, **kwargs: Any) -> T:
        data = kwargs["settings"].data
        # the default port is no choice: a running `chamvi dev` says where its API is
        given = click.get_current_context().get_parameter_source("api_port") != ParameterSource.DEFAULT
        port = api_port if given else None
        return function(*args, api=dev_api(api_url, token, data, port), **kwargs)

    with_options = click.option(
        "--api",
        "api_url",
        envvar="CHAMVI_API_URL",
        show_envvar=True,
        metavar="URL",
        help="The HTTP API to follow the run through [default: the API of the `chamvi dev` running on "
        "CHAMVI_DATA, else --api-port on this machine if a token is there; else Temporal, without the "
        "model's live text].",
    )(command)
    with_options = click.option(
        "--token",
        envvar="CHAMVI_API_TOKEN",
        show_envvar=True,
        help="A token with runs:read [default: the one `chamvi dev` keeps in CHAMVI_DATA/api-token].",
    )(with_options)
    # the port `chamvi dev` and `chamvi api` serve on, read the same way
    return api_port_option(with_options)


def dev_api(api_url: str | None, token: str | None, data: Path, port: int | None) -> Api | None:
    """The API to follow through: the one given, else a ``chamvi dev`` API of this data folder.

    A running ``chamvi dev`` records its API's URL and token file in ``DATA/dev-stack.json``; a
    ``port`` given (``--api-port``) wins over it. Without a running stack, ``DATA/api-token`` on
    ``port`` (default 3000). With neither an URL nor a token, there is no API to try and the events
    come from Temporal.
    """
    if api_url is not None:
        if not token:
            raise click.ClickException(
                "--api needs a token with runs:read: pass --token or set CHAMVI_API_TOKEN"
            )
        return Api(api_url.rstrip("/"), token)
    from chamvi._dev import read_stack

    stack = read_stack(data.resolve()) or {}
    url = f"http://127.0.0.1:{port or DEFAULT_API_PORT}"
    saved = data / "api-token"
    if port is None and "api_url" in stack:
        url = stack["api_url"]
        saved = Path(stack["token_file"]) if "token_file" in stack else saved
    value = token or (saved.read_text().strip() if saved.exists() else "")
    if not value:
        return None
    return Api(url.rstrip("/"), value)


def _event(fields: dict[str, str]) -> RunEvent:
    data: dict[str, Any] = json.loads(fields["data"])
    event_id = data.pop("event_id", None)
    return RunEvent(str(data.pop("type")), str(data.pop("run_id")), event_id, data)


async def api_events(api: Api, run_id: str) -> AsyncGenerator[RunEvent, None]:
    """The run's events from ``GET /runs/{id}/events``, resumed after a dropped connection.

    Raises:
        httpx.ConnectError: no API answers at the URL (the caller falls back to Temporal).
        click.ClickException: the API refused the request (a wrong token, an unknown run).
    """
    import httpx  # here, not at the top: it loads rich, which `chamvi runs list` does not need

    last: int | None = None
    attempts = 0
    headers = {"authorization": f"Bearer {api.token}", "accept": "text/event-stream"}
    # no read timeout: a run may wait days for a person (the server sends keep-alives meanwhile)
    timeout = httpx.Timeout(10, read=None)
    async with httpx.AsyncClient(base_url=api.url, headers=headers, timeout=timeout) as http:
        while True:
            resume = {"Last-Event-ID": str(last)} if last is not None else {}
            try:
                async with http.stream("GET", f"/runs/{run_id}/events", headers=resume) as response:
                    if response.status_code == 204:
                        return
                    if response.status_code != 200:
                        await response.aread()
                        raise click.ClickException(f"the API at {api.url} answered {_refusal(response)}")
                    fields: dict[str, str] = {}
                    async for line in response.aiter_lines():
                        if line:
                            if not line.startswith(":"):
                                name, _, value = line.partition(":")
                                fields[name] = value.removeprefix(" ")
                            continue
                        if "data" in fields:
                            event = _event(fields)
                            if event.event_id is not None:
                                last = event.event_id
                            yield event
                            if event.final:
                                return
                        fields = {}
            except httpx.ConnectError:
                if last is None:
                    raise
            except httpx.TransportError:
                pass
            attempts += 1
            if attempts > RECONNECTS:
                raise click.ClickException(f"the event stream of run {run_id} at {api.url} keeps breaking")


def _refusal(response: httpx.Response) -> str:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200]
    return f"{response.status_code}: {message}"


async def events_of(chamvi: ChamviClient, run_id: str, api: Api | None) -> AsyncGenerator[RunEvent, None]:
    """The run's events through ``api`` when it answers, else from Temporal."""
    # each stream is closed here, in this task, when its reader stops early: left to the garbage
    # collector, its HTTP connection would be closed from another task and fail loudly
    if api is not None:
        import httpx

        async with contextlib.aclosing(api_events(api, run_id)) as stream:
            try:
                first = await anext(stream)
            except httpx.ConnectError:
                echo_err(f"no API at {api.url}: following through Temporal, without the model's live text")
            except StopAsyncIteration:
                return
            else:
                yield first
                async for event in stream:
                    yield event
                return
    async with contextlib.aclosing(chamvi.events(run_id)) as history:
        async for event in history:
            yield event


class Printer:
    """The run as a person reads it: the model's text on stdout as it comes, the rest on stderr.

    With ``as_json``, every event as one JSON line on stdout instead.
    """

    def __init__(self, run_id: str, *, as_json: bool) -> None:
        self.run_id = run_id
        self.as_json = as_json
        self._streamed: set[int] = set()
        self._open_line = False

    def _end_line(self) -> None:
        if self._open_line:
            click.echo("")
            self._open_line = False

    def show(self, event: RunEvent) -> None:
        """Prints one event."""
        if self.as_json:
            click.echo(json.dumps(event.as_dict(), default=str))
            return
        data = event.data
        if event.type == RUN_DELTA:
            if data.get("kind") == "text":
                self._streamed.add(int(data["step"]))
                click.echo(str(data["text"]), nl=False)
                self._open_line = True
            else:
                click.secho(str(data["text"]), nl=False, err=True, dim=True)
            return
        self._end_line()
        if event.type == "run.step":
            self._step(data)
        elif event.type == "run.waiting":
            echo_err(
                f"waiting for approval {data['approval_id']}: {data['title']} (tool {data['tool']}, until "
                f"{data['deadline']}); answer with `chamvi approve {self.run_id}` or `--deny`"
            )
        elif event.type == "run.resumed":
            verdict = "approved" if data.get("approved") else "denied"
            reason = f" ({data['reason']})" if data.get("reason") else ""
            echo_err(f"{verdict} {data['approval_id']}{reason}: the run goes on")
        elif event.type == "run.started":
            echo_err(f"run {self.run_id} started")

    def _step(self, data: dict[str, Any]) -> None:
        step = int(data["step"])
        if data["kind"] == "llm":
            if data.get("text") and step not in self._streamed:
                click.echo(str(data["text"]))
            for call in data.get("tool_calls") or ():
                echo_err(f"step {step}: calls {call['name']}({short(call.get('arguments'), 60)})")
        else:
            error = data.get("error")
            result = f"error {error['code']}: {error['message']}" if error else short(data.get("output"))
            echo_err(f"step {step}: {data['tool']} -> {short(result)}")

    def outcome(self, event: RunEvent) -> None:
        """Prints how the run ended; a run that did not complete exits non-zero."""
        if self.as_json:
            self.show(event)
        else:
            self._end_line()
        if event.type == "run.completed":
            output = event.data.get("output")
            if not self.as_json and not isinstance(output, str):
                click.echo(dump(output))
            return
        if self.as_json:
            raise click.exceptions.Exit(1)
        if event.type == "run.failed":
            error = event.data.get("error") or {}
            raise click.ClickException(
                f"run {self.run_id} failed: {error.get('code', 'failed')}: {error.get('message', '')}"
            )
        raise click.ClickException(f"run {self.run_id} was cancelled")


async def follow_run(chamvi: ChamviClient, run_id: str, api: Api | None, printer: Printer) -> RunEvent | None:
    """Prints the run's events until it ends; returns the last one."""
    async with contextlib.aclosing(events_of(chamvi, run_id, api)) as events:
        async for event in events:
            if event.final:
                return event
            printer.show(event)
    return None
