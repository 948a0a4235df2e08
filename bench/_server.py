"""What every benchmark does around its measurements: find the Temporal CLI, describe the machine,
start a dev server of its own, and take ``--quick``.

Apart from ``_common`` on purpose: the workflow sandbox re-imports that module for every bare
workflow it runs, and the baseline must not pay for these imports.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from chamvi._constants import SEARCH_ATTRIBUTES
from chamvi._dev import find_temporal
from chamvi.errors import DevStackError


def temporal_path() -> str:
    """The ``temporal`` binary ``chamvi dev`` would start: on PATH, else beside this Python, so
    ``.venv/bin/python bench/runs.py`` works without an activated venv."""
    try:
        return find_temporal()
    except DevStackError as error:
        raise SystemExit(error.message) from None


def machine() -> str:
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load}"


@asynccontextmanager
async def dev_server(path: str) -> AsyncIterator[Client]:
    """A dev server (``temporal server start-dev``) with chamvi's search attributes, shut down after."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=path,
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    try:
        yield env.client
    finally:
        await env.shutdown()


def options(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """The parser every benchmark starts from: its docstring's first line, and ``--quick``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {quick}")
    return parser
