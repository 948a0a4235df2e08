"""``chamvi skills list [AGENT]`` and ``chamvi skills update``: agents' skills and their git pins.

Both load the skills as a worker's boot does (reading git pins from the stack's artifact store,
fetching into ``<data>/skills``), without a Temporal server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from chamvi.app import App
from chamvi.artifacts import ArtifactStore, open_artifact_store
from chamvi.cli._common import app_option, build_settings, data_option, json_option, load_app_or_fail
from chamvi.cli._output import columns, dump, echo_err, short
from chamvi.errors import ChamviError
from chamvi.models.skills import AgentSkills
from chamvi.skills.catalog import short_version
from chamvi.skills.git import GitSkills
from chamvi.skills.library import SkillLibrary, sources_of
from chamvi.skills.store import StorePins

_DATA_HELP = "Folder for local state: the artifact store (unless CHAMVI_ARTIFACTS_URL) and git clones."


def library_for(app: App, data: Path) -> tuple[SkillLibrary, ArtifactStore]:
    """The skills of ``app`` as the stack at ``data`` holds them (its artifact store, its git clones)."""
    settings = build_settings(None, None, None, data=data.resolve())
    store = open_artifact_store(settings)
    return SkillLibrary(app, lambda: store, cache=settings.data / "skills"), store


def load_listings(app: App, data: Path, agents: list[str]) -> list[AgentSkills]:
    """Each of ``agents``' current catalog, read without recording or saving anything.

    Raises:
        InvalidSkillError: a bad skill (one line naming the file).
    """
    library, _ = library_for(app, data)

    async def go() -> list[AgentSkills]:
        await library.load(record=False, save=False)
        return [await library.listing(app.agents[name]) for name in agents]

    return asyncio.run(go())


def listing_lines(listing: AgentSkills) -> list[str]:
    """An agent's catalog for a person: its version, then a row per skill."""
    if listing.version is None:
        return [f"agent {listing.agent}: no skills"]
    count = len(listing.skills)
    rows = [
        (
            s.name,
            short_version(s.version),
            s.source + ("" if s.trusted else ", untrusted"),
            short(s.description, 80),
        )
        for s in listing.skills
    ]
    head = (
        f"agent {listing.agent}: catalog {short_version(listing.version)}, {count} skill{'s' * (count != 1)}"
    )
    return [head, *(f"  {line}" for line in columns(rows))]


@click.group()
def skills() -> None:
    """Skills: the procedures each agent has (Agent Skills folders), at the version runs pin."""


@skills.command("list")
@click.argument("agent", required=False)
@app_option
@data_option(_DATA_HELP)
@json_option()
def list_skills(agent: str | None, app_ref: str, data: Path, as_json: bool) -> None:
    """List the skills of AGENT (every agent without it): name, version, source, description.

    A run starting now records the catalog version shown; runs under way keep the one they started
    with.
    """
    app = load_app_or_fail(app_ref)
    if agent is not None and agent not in app.agents:
        known = ", ".join(repr(a) for a in app.agents) or "none"
        raise click.ClickException(f"unknown agent {agent!r}: {app_ref} serves {known}")
    try:
        listings = load_listings(app, data, [agent] if agent is not None else list(app.agents))
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    if as_json:
        click.echo(dump(listings[0] if agent is not None else listings))
        return
    for listing in listings:
        for line in listing_lines(listing):
            click.echo(line)


@skills.command("update")
@app_option
@data_option(_DATA_HELP)
def update_skills(app_ref: str, data: Path) -> None:
    """Move each git source's pin to the commit its branch or tag names now.

    The pins live in the stack's artifact store: workers load the new commit at their next start.
    Sources pinned with commit= in the code stay where they are.
    """
    app = load_app_or_fail(app_ref)
    following = [s for s in sources_of(app) if isinstance(s, GitSkills) and s.commit is None]
    if not following:
        echo_err("no git skill source follows a branch or tag: nothing to update")
        return
    library, store = library_for(app, data)
    pins = StorePins(store)
    before = {s.pin_key: pins.get(s.pin_key) for s in following}
    try:
        asyncio.run(library.load(update=True, save=False))
    except ChamviError as error:
        raise click.ClickException(error.message) from None
    for source in following:
        old, new = before[source.pin_key], pins.get(source.pin_key)
        assert new is not None
        if old is None or old.commit == new.commit:
            click.echo(f"git {source.url} ({source.ref}): at {new.commit[:12]}")
        else:
            click.echo(f"git {source.url} ({source.ref}): moved from {old.commit[:12]} to {new.commit[:12]}")
