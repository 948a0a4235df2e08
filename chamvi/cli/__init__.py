"""The ``chamvi`` command line: the local stack, workers, runs, knowledge collections and agent state.

Runs can be dispatched, listed, shown, approved and cancelled.

Every run operation goes through ``ChamviClient``; the same runs are visible in the Temporal UI
and the ``temporal`` CLI. Failures a person can fix are one line and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

import click

from chamvi.cli import agents, api, artifacts, channels, kb, knowledge, mcp, runs, schedules, stack, state
from chamvi.cli._common import POLL_SECONDS

__all__ = ["POLL_SECONDS", "cli", "main"]


@click.group(
    name="chamvi", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(package_name="chamvi-temporal", prog_name="chamvi")
def cli() -> None:
    """Durable AI agents on Temporal.

    Start here: `chamvi dev` runs a local Temporal server and a worker for the example app;
    `chamvi dispatch support --payload '{...}'` starts a run.
    """


for _command in (
    stack.dev,
    stack.worker,
    stack.check,
    api.api,
    runs.dispatch,
    runs.runs,
    runs.approve,
    runs.cancel,
    artifacts.artifacts,
    channels.channels,
    knowledge.knowledge,
    kb.kb,
    mcp.mcp,
    schedules.schedules,
    state.state,
    agents.agents,
):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script; ``worker.py`` calls ``main(["worker", ...])``."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="chamvi")
        code = 0
    except SystemExit as exiting:
        code = exiting.code if isinstance(exiting.code, int) else (0 if exiting.code is None else 1)
    # The SDK's Rust threads can abort CPython's finalisation at the end of a short-lived client
    # process ("PyGILState_Release: thread state must be current", temporalio/sdk-python#300):
    # everything is done and flushed here, so leave without finalising.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
