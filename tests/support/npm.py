"""The npm MCP servers and the MCP Inspector that .ci/run installs into tests/node."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

NPM = Path(__file__).resolve().parents[1] / "node"


def npm_bin(name: str) -> str:
    """The path of ``name`` in tests/node/node_modules/.bin; skips the test when it cannot run."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the npm MCP servers cannot run")
    path = NPM / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(f"{name} is not installed: run `npm ci --prefix tests/node` (as .ci/run does)")
    return str(path)
