"""``chamvi artifacts list RUN`` and ``chamvi artifacts get ID -o FILE``: a run's files.

They are read from the artifact store directly (``CHAMVI_ARTIFACTS_URL``, else the data folder's):
no Temporal needed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from chamvi.artifacts import ArtifactStore, open_artifact_store
from chamvi.cli._common import json_option
from chamvi.cli._output import artifact_lines, dump, echo_err
from chamvi.errors import ChamviError
from chamvi.settings import Settings

T = TypeVar("T")


def _with_store(operation: Callable[[ArtifactStore], Coroutine[Any, Any, T]]) -> T:
    """Runs ``operation`` on the settings' store; a failure is one line."""
    try:
        store = open_artifact_store(Settings.from_env())
        return asyncio.run(operation(store))
    except ChamviError as error:
        raise click.ClickException(error.message) from None


@click.group()
def artifacts() -> None:
    """The files runs received (attachments) and made."""


@artifacts.command("list")
@click.argument("run_id", metavar="RUN")
@json_option()
def list_artifacts(run_id: str, as_json: bool) -> None:
    """List RUN's artifacts in order: its attachments, then what its tools put."""
    found = _with_store(lambda store: store.list(run_id))
    if as_json:
        click.echo(dump(found))
    elif not found:
        echo_err(f"run {run_id} has no artifacts")
    else:
        for line in artifact_lines(found):
            click.echo(line)


@artifacts.command("get")
@click.argument("artifact_id", metavar="ID")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Where to write the file ('-' for stdout).",
)
def get_artifact(artifact_id: str, output: Path) -> None:
    """Write the bytes of artifact ID to a file."""
    data = _with_store(lambda store: store.read(artifact_id))
    if str(output) == "-":
        sys.stdout.buffer.write(data)
        return
    output.write_bytes(data)
    echo_err(f"wrote {len(data):,} bytes to {output}")
