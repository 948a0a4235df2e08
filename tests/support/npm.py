"""What the tests run under node from tests/node (octokit, the npm MCP servers, the MCP Inspector),
installed by scripts/test; a test that needs one and finds it missing is skipped, saying how to install it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

NODE_TESTS = Path(__file__).resolve().parents[1] / "node"
INSTALL = "run `npm ci --prefix tests/node` (scripts/test does when npm is there)"


def node_missing(module: str) -> str | None:
    """Why ``module`` (a path under tests/node/node_modules) cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return f"no node on this machine, so {module} cannot run: install node and npm, then {INSTALL}"
    if not (NODE_TESTS / "node_modules" / module).exists():
        return f"tests/node/node_modules has no {module}: {INSTALL}"
    return None


def npm_bin(name: str) -> str:
    """The path of ``name`` in tests/node/node_modules/.bin; skips the test when it cannot run."""
    module = f".bin/{name}"
    reason = node_missing(module)
    if reason is not None:
        pytest.skip(reason)
    return str(NODE_TESTS / "node_modules" / module)
