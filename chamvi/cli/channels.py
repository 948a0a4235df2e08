"""``chamvi channels list``: the app's channels, how runs arrive through them, who subscribes."""

from __future__ import annotations

from typing import Any

import click

from chamvi.app import App
from chamvi.channels import LifecycleChannel, channel_sends
from chamvi.cli._common import app_option, json_option, load_app_or_fail
from chamvi.cli._output import dump, echo_err
from chamvi.webhooks import WebhookChannel


@click.group()
def channels() -> None:
    """The app's channels."""


def _inbound(channel: Any) -> str:
    if isinstance(channel, WebhookChannel):
        return f"POST /channels/{channel.name}/events"
    if isinstance(channel, LifecycleChannel):
        return "started by each worker"
    return "none"


def _kind(channel: Any) -> str:
    if not isinstance(channel, WebhookChannel):
        return type(channel).__name__
    return "webhook" if channel.scheme.name == "chamvi" else f"webhook ({channel.scheme.name})"


def describe_channels(app: App) -> list[dict[str, Any]]:
    """One row per channel: its kind, inbound and outbound, trust, default address, subscribers."""
    rows = []
    for name, channel in app.channels.items():
        subscribers = [
            f"{agent.name}"
            + (f" ({s.id})" if s.id else "")
            + (f" [events: {', '.join(sorted(s.events))}]" if s.events is not None else "")
            + (" [filtered]" if s.filter else "")
            for agent in app.agents.values()
            for s in agent.channels
            if s.channel == name
        ]
        rows.append(
            {
                "name": name,
                "kind": _kind(channel),
                "inbound": _inbound(channel),
                "outbound": channel_sends(channel),
                "untrusted": bool(getattr(channel, "untrusted", False)),
                "default_address": channel.default_address,
                "subscribers": subscribers,
            }
        )
    return rows


@channels.command("list")
@app_option
@json_option()
def list_channels(app_ref: str, as_json: bool) -> None:
    """List the app's channels: inbound route, outbound, trust, default address and subscribers."""
    rows = describe_channels(load_app_or_fail(app_ref))
    if as_json:
        click.echo(dump(rows))
        return
    if not rows:
        echo_err("no channels: give App(channels=[...])")
        return
    for row in rows:
        flags = ["out" if row["outbound"] else "no out", "untrusted" if row["untrusted"] else "trusted"]
        click.echo(f"{row['name']}  {row['kind']}  in: {row['inbound']}  ({', '.join(flags)})")
        if row["default_address"]:
            click.echo(f"  default address: {row['default_address']}")
        click.echo(f"  subscribers: {', '.join(row['subscribers']) or 'none'}")
