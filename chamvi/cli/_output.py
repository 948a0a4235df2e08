"""How the commands print: results on stdout, progress and hints on stderr, tables, one-line values."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click
from pydantic import BaseModel

from chamvi.models import Artifact

_SPINNER = "|/-\\"


def echo_err(message: str) -> None:
    """Prints ``message`` on stderr: progress and hints, never the command's result."""
    click.echo(message, err=True)


def dump(value: Any) -> str:
    """``value`` (a model, a list of them, or plain data) as indented JSON."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(value, indent=2, ensure_ascii=False)


def when(moment: datetime | None) -> str:
    """A moment in local time to the second, or ``-``."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "-"


def short(value: Any, limit: int = 100) -> str:
    """``value`` on one line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def columns(cells: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells as left-aligned columns two spaces apart; the first row is the header."""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]


def artifact_lines(artifacts: Sequence[Artifact]) -> list[str]:
    """A table of artifacts: id, media type, size, file name."""
    cells = [("ID", "TYPE", "BYTES", "NAME")] + [
        (a.id, a.media_type, f"{a.size:,}", a.filename or "-") for a in artifacts
    ]
    return columns(cells)


class Spinner:
    """One status line where a person waits: a spinner on a terminal, one line per change elsewhere."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.frames = itertools.cycle(_SPINNER)
        self.last = ""

    def show(self, text: str) -> None:
        """Shows ``text`` after the label."""
        if self.tty:
            click.echo(f"\r{next(self.frames)} {self.label}: {text}\033[K", err=True, nl=False)
        elif text != self.last:
            echo_err(f"{self.label}: {text}")
        self.last = text

    def close(self) -> None:
        """Clears the spinner's line, before other output and at the end."""
        if self.tty:
            click.echo("\r\033[K", err=True, nl=False)
