"""Running the command line in a test, against the session's Temporal server and the test's queue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from click.testing import CliRunner, Result
from temporalio.client import Client

from chamvi.cli import cli

Cli = Callable[..., "asyncio.Future[Result]"]


def cli_on(client: Client, task_queue: str) -> Cli:
    """``await run("state", "list", "agent")``: the CLI in a thread of its own (it runs ``asyncio.run``)."""
    address = client.service_client.config.target_host

    def run(*args: str) -> asyncio.Future[Result]:
        argv = [*args, "--address", address, "--namespace", client.namespace, "--task-queue", task_queue]
        return asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, cli, argv))

    return run
