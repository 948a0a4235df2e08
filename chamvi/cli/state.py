"""``chamvi state list AGENT [COLLECTION]``: what an agent remembers, read through a worker."""

from __future__ import annotations

import click

from chamvi.cli._common import json_option, run_with_client, temporal_options
from chamvi.cli._output import columns, dump, echo_err, short, when
from chamvi.models.state import STATE_LIST_MAX, StateListing, StatePage
from chamvi.settings import Settings


@click.group()
def state() -> None:
    """Agent state: the collections and key-value entries an agent remembers between runs.

    The worker holds Qdrant, so a listing is a short `AgentStateList` workflow a worker answers.
    """


def _page_lines(page: StatePage) -> list[str]:
    rows = [(i.key, when(i.updated_at), short(i.value)) for i in page.items]
    lines = columns([("KEY", "WRITTEN", "VALUE"), *rows])
    if page.next_offset is not None:
        lines.append(f"more: --offset {page.next_offset}")
    return lines


def _lines(listing: StateListing) -> list[str]:
    if listing.collection is not None:
        return _page_lines(listing.page) if listing.page.items else []
    sizes = listing.collections.items()
    lines = [f"{name}  {count} item{'s' if count != 1 else ''}" for name, count in sizes]
    if listing.page.items:
        lines.extend(["", "key-value entries", *_page_lines(listing.page)])
    return lines


@state.command("list")
@click.argument("agent")
@click.argument("collection", required=False)
@click.option("--limit", type=click.IntRange(1, STATE_LIST_MAX), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option()
@temporal_options()
def list_state(
    agent: str, collection: str | None, limit: int, offset: int, as_json: bool, settings: Settings
) -> None:
    """List COLLECTION of AGENT, most recently written first.

    Without COLLECTION: the agent's collections with their sizes, and its key-value entries.
    """
    listing = run_with_client(
        settings, lambda chamvi: chamvi.state.list(agent, collection, limit=limit, offset=offset)
    )
    if as_json:
        click.echo(dump(listing))
        return
    lines = _lines(listing)
    if not lines:
        echo_err(f"agent {agent!r} remembers nothing" + (f" in {collection!r}" if collection else ""))
    for line in lines:
        click.echo(line)
