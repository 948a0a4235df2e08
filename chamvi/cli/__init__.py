"""The ``chamvi`` command line: the local stack, workers, runs, knowledge collections and agent state.

Runs can be dispatched, listed, shown, approved and cancelled; conversations talked in (``chat``),
listed and shown.

Every run operation goes through ``ChamviClient``; the same runs are visible in the Temporal UI
and the ``temporal`` CLI. Failures a person can fix are one line and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from chamvi.cli._common import POLL_SECONDS

__all__ = ["COMMANDS", "POLL_SECONDS", "cli", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "dev": (
        "chamvi.cli.stack:dev",
        "Run a local Temporal dev server (SQLite in DATA, Web UI), a worker for the app and the HTTP API.",
    ),
    "worker": (
        "chamvi.cli.stack:worker",
        "Run a worker for the app until SIGINT/SIGTERM; run as many replicas as you like.",
    ),
    "check": ("chamvi.cli.stack:check", "Load the app and report problems."),
    "api": (
        "chamvi.cli.api:api",
        "Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) until SIGINT/SIGTERM.",
    ),
    "dispatch": (
        "chamvi.cli.runs:dispatch",
        "Start a run of AGENT and print its id "
        "(with --wait: its outcome; non-zero exit unless it completes).",
    ),
    "runs": ("chamvi.cli.runs:runs", "List and inspect runs."),
    "approve": (
        "chamvi.cli.runs:approve",
        "Approve (or --deny) what RUN waits on, or the approval a --token names.",
    ),
    "cancel": ("chamvi.cli.runs:cancel", "Cancel RUN; it settles as cancelled."),
    "chat": (
        "chamvi.cli.chat:chat",
        "Talk with AGENT: each line is a message, the answer streams in as the model writes it.",
    ),
    "conversations": (
        "chamvi.cli.chat:conversations",
        "List and read conversations (talk with `chamvi chat`).",
    ),
    "artifacts": ("chamvi.cli.artifacts:artifacts", "The files runs received (attachments) and made."),
    "channels": ("chamvi.cli.channels:channels", "The app's channels."),
    "knowledge": (
        "chamvi.cli.knowledge:knowledge",
        "Knowledge collections: list them, ask for a pass, search one.",
    ),
    "kb": (
        "chamvi.cli.kb:kb",
        "An agent's knowledge base (a folder of linked markdown pages): index, read, search, check.",
    ),
    "mcp": (
        "chamvi.cli.mcp:mcp",
        "Serve the knowledge tools over MCP: a wiki's (--kb) and knowledge_search (--collection).",
    ),
    "schedules": (
        "chamvi.cli.schedules:schedules",
        "Temporal Schedules that start agent runs (a cron or an interval).",
    ),
    "skills": (
        "chamvi.cli.skills:skills",
        "Skills: the procedures each agent has (Agent Skills folders), at the version runs pin.",
    ),
    "state": (
        "chamvi.cli.state:state",
        "Agent state: the collections and key-value entries an agent remembers between runs.",
    ),
    "agents": (
        "chamvi.cli.agents:agents",
        "The agents the workers serve: in code, and defined at runtime as data.",
    ),
}
"""Each command's ``module:attribute`` and its one-line help, so ``chamvi --help`` imports none of them.

A command's module is imported when the command runs; a unit test keeps these help lines equal to the
commands' own.
"""


def __getattr__(name: str) -> object:
    # the commands' shared constant, without importing their helpers for `chamvi --help`
    if name == "POLL_SECONDS":
        from chamvi.cli._common import POLL_SECONDS

        return POLL_SECONDS
    raise AttributeError(f"module 'chamvi.cli' has no attribute {name!r}")


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attribute = entry[0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the same rows as click.Group.format_commands, from the table instead of the commands
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=help_line).get_short_help_str(limit))
            for name, (_, help_line) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    name="chamvi",
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="chamvi-temporal", prog_name="chamvi")
def cli() -> None:
    """Durable AI agents on Temporal.

    Start here: `chamvi dev` runs a local Temporal server and a worker for the example app;
    `chamvi dispatch support --payload '{...}'` starts a run.
    """


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
