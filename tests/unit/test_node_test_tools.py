"""A fresh clone without tests/node's packages skips the tests that need them, naming the install command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import npm


def test_a_missing_npm_tool_skips_its_test_naming_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(npm, "NODE_TESTS", tmp_path)  # a clone where npm ci never ran
    monkeypatch.setattr(npm.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(pytest.skip.Exception) as skipped:
        npm.npm_bin("mcp-server-filesystem")
    assert "mcp-server-filesystem" in str(skipped.value)
    assert "npm ci --prefix tests/node" in str(skipped.value)


def test_no_node_skips_the_tests_that_need_it_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(npm.shutil, "which", lambda name: None)
    reason = npm.node_missing("@octokit/webhooks-methods")
    assert reason is not None and "no node" in reason and "npm ci --prefix tests/node" in reason
    with pytest.raises(pytest.skip.Exception):
        npm.npm_bin("mcp-inspector")


def test_an_installed_npm_tool_is_found_where_npm_ci_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "node_modules" / ".bin").mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin" / "mcp-inspector").touch()
    monkeypatch.setattr(npm, "NODE_TESTS", tmp_path)
    monkeypatch.setattr(npm.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert npm.npm_bin("mcp-inspector") == str(tmp_path / "node_modules" / ".bin" / "mcp-inspector")
