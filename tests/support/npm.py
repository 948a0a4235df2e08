"""The npm MCP servers and the MCP Inspector that .ci/run installs into tests/npm."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

NPM = Path(__file__).resolve().parents[1] / "npm"


def npm_bin(name: str) -> str:
    """The path of ``name`` in tests/npm/node_modules/.bin; skips the test when it cannot run."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the npm MCP servers cannot run")
    path = NPM / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(f"{name} is not installed: run `npm ci --prefix tests/npm` (as .ci/run does)")
    return str(path)
