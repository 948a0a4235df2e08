"""The command line answers at once: a client command imports only what it needs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import click

from chamvi.cli import COMMANDS, cli

HEAVY = (
    "qdrant_client",
    "qdrant_edge",
    "fastapi",
    "starlette",
    "uvicorn",
    "openai",
    "anthropic",
    "opentelemetry.sdk",
    "mcp",
)

# each a client command: a round trip to Temporal (refused at once here: nothing listens on port 1)
CLIENT_COMMANDS = (
    ["runs", "list"],
    ["runs", "show", "run-1"],
    ["runs", "watch", "run-1"],
    ["dispatch", "support", "--payload", "{}"],
    ["approve", "run-1"],
    ["cancel", "run-1"],
    ["agents", "list"],
    ["schedules", "list"],
    ["state", "list", "support", "notes"],
    ["conversations", "list", "support"],
    ["knowledge", "list"],
)

PROBE = textwrap.dedent(
    """
    import json, os, sys
    heavy, commands = json.loads(sys.argv[1])
    from chamvi.cli import cli
    found = {}
    for args in commands:
        try:
            cli.main(args=args, prog_name="chamvi", standalone_mode=False)
        except BaseException:
            pass
        loaded = sorted(h for h in heavy if h in sys.modules)
        found[" ".join(args)] = loaded
    print(json.dumps(found), flush=True)
    # eleven commands' Temporal clients in one process: tearing their runtimes down at exit
    # crashed about one probe in ten under load (SIGSEGV); one command a process exits cleanly
    os._exit(0)
    """
)


def _probe(commands: list[list[str]], *extra: str) -> dict[str, list[str]]:
    env_args = json.dumps([[*HEAVY, *extra], commands])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, env_args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "TEMPORAL_ADDRESS": "127.0.0.1:1", "CHAMVI_API_TOKEN": "t"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_chamvi_help_imports_no_command_nor_temporalio() -> None:
    found = _probe([["--help"]], "temporalio", "pydantic", "chamvi.cli.stack", "chamvi.cli.runs")
    assert found == {"--help": []}


def test_client_commands_import_no_vector_store_web_framework_model_sdk_or_telemetry_sdk() -> None:
    found = _probe([list(args) for args in CLIENT_COMMANDS])
    assert found == {" ".join(args): [] for args in CLIENT_COMMANDS}


def test_the_help_table_says_what_each_command_says_of_itself() -> None:
    ctx = click.Context(cli)
    for name, (_, help_line) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        assert click.Command(name, help=help_line).get_short_help_str(200) == command.get_short_help_str(200)
