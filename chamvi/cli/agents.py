"""Agents defined at runtime: ``chamvi agents list / show / put / rm``.

A runtime agent is data (JSON or YAML: model, instructions, tools named from the App's
``runtime_tools``, budget, tool policy, trust); a worker on the task queue checks each put against its
App and stores it as the agent's next revision, which new runs start on. See
``chamvi.dynamic_agents`` for what a definition may hold.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from chamvi.cli._common import json_option, run_with_client, temporal_options
from chamvi.cli._output import columns, dump, short, when
from chamvi.models import AgentInfo
from chamvi.settings import Settings


def _read(source: str) -> dict[str, Any]:
    """The definition in FILE (``.json``, ``.yaml``/``.yml``; ``-`` reads JSON or YAML from stdin)."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise click.ClickException(f"cannot read {source!r}: {error.strerror or error}") from None
    if source.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise click.ClickException(f"{source} is not JSON: {error}") from None
    else:
        data = _yaml(source, text)
    if not isinstance(data, dict):
        raise click.ClickException(f"{source} must hold one object: model, instructions, tools, ...")
    return data


def _yaml(source: str, text: str) -> Any:
    try:
        import yaml  # PyYAML: installed with fastembed's hub client; JSON is read without it
    except ImportError:
        message = f"reading {source} needs PyYAML (pip install pyyaml), or write the agent as JSON"
        raise click.ClickException(message) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise click.ClickException(f"{source} is not YAML (nor JSON): {error}") from None


def _table(agents: list[AgentInfo]) -> list[str]:
    header = ("AGENT", "KIND", "REVISION", "MODEL", "TOOLS", "DESCRIPTION")
    cells = [header] + [
        (
            a.name,
            a.kind,
            str(a.revision) if a.revision is not None else "-",
            a.model or "(app default)",
            ", ".join([*a.tools, *(f"mcp:{s}" for s in a.mcp_servers)]) or "-",
            short(a.description, 50) if a.description else "-",
        )
        for a in agents
    ]
    return columns(cells)


@click.group()
def agents() -> None:
    """The agents the workers serve: in code, and defined at runtime as data."""


@agents.command("list")
@json_option()
@temporal_options()
def list_agents(as_json: bool, settings: Settings) -> None:
    """List the agents new runs may start: the app's, then those put at runtime with their revision."""
    found = run_with_client(settings, lambda chamvi: chamvi.agents.list())
    if as_json:
        click.echo(dump(found))
        return
    for line in _table(found):
        click.echo(line)


@agents.command("show")
@click.argument("name")
@click.option("--revision", type=click.IntRange(min=1), help="That revision, not the latest.")
@json_option()
@temporal_options()
def show_agent(name: str, revision: int | None, as_json: bool, settings: Settings) -> None:
    """Show agent NAME; a runtime agent with its definition (as `chamvi agents put` takes it)."""
    found = run_with_client(settings, lambda chamvi: chamvi.agents.get(name, revision))
    if as_json:
        click.echo(dump(found))
        return
    click.echo(f"agent     {found.name} ({found.kind})")
    if found.revision is not None:
        by = f" by {found.by.name or found.by.id}" if found.by is not None else ""
        click.echo(f"revision  {found.revision}, put {when(found.created_at)}{by}")
    click.echo(f"model     {found.model or '(app default)'}")
    click.echo(f"tools     {', '.join(found.tools) or '-'}")
    if found.definition is not None:
        click.echo("definition")
        definition = found.definition.model_dump(mode="json", exclude_none=True)
        click.echo("\n".join(f"  {line}" for line in json.dumps(definition, indent=2).splitlines()))


@agents.command("put")
@click.argument("source", metavar="FILE")
@click.option("--name", help="The agent's name [default: the file's `name`].")
@json_option()
@temporal_options()
def put_agent(source: str, name: str | None, as_json: bool, settings: Settings) -> None:
    """Put the agent FILE defines (JSON or YAML; '-' reads stdin) as its next revision.

    A worker checks it against its app: the tools come from the app's runtime tools, the model from
    its registry. New runs start on the new revision; runs already going keep theirs.
    """
    data = _read(source)
    agent = name or data.get("name")
    if not isinstance(agent, str):
        raise click.ClickException(f"{source} names no agent: give it a `name`, or pass --name")
    if name is not None:
        data = {**data, "name": name}
    put = run_with_client(settings, lambda chamvi: chamvi.agents.put(agent, data))
    if as_json:
        click.echo(dump(put))
    elif not put.changed:
        click.echo(f"agent {agent} is unchanged at revision {put.agent.revision}")
    else:
        verb = "created" if put.created else "updated"
        click.echo(f"{verb} agent {agent} at revision {put.agent.revision}")


@agents.command("rm")
@click.argument("name")
@temporal_options()
def remove_agent(name: str, settings: Settings) -> None:
    """Remove runtime agent NAME: new runs are refused, runs going finish on their revision."""
    revision = run_with_client(settings, lambda chamvi: chamvi.agents.remove(name))
    click.echo(f"removed agent {name} (revision {revision}); `chamvi agents put` brings it back")
