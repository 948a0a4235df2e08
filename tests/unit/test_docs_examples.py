"""Every Python block of README.md and docs/ runs (or says why it cannot), so no example rots.

A block runs as a module of its own in a temporary folder (``__name__`` is not ``"__main__"``, so a
script's ``main()`` is not started), with the webhook secrets the examples read from the environment set.
A block that needs more than that says so in an HTML comment right above it, which neither GitHub nor
MkDocs shows:

- ``<!-- docs-test: run by tests/integration/test_x.py -->``: a test runs it against a real stack
  (a Temporal server, a worker, a collector); here it is only compiled, and the named test must exist;
- ``<!-- docs-test: compile-only: <why> -->``: a fragment (top-level ``await``, names from the text
  around it) or a script that needs a running stack; compiled only.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import CodeType

import pytest

from tests.support.docs import ROOT, Block, all_pages, blocks_of

SECRETS = ("GITHUB_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET", "STRIPE_WEBHOOK_SECRET", "ACME_SECRET")


def python_blocks() -> list[Block]:
    return [b for path in all_pages() for b in blocks_of(path.read_text(), path) if b.lang == "python"]


def compiled(block: Block) -> CodeType:
    return compile(block.body, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_the_docs_python_block_runs_or_says_why_not(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = compiled(block)
    marker = block.marker or ""
    if marker.startswith("run by "):
        test = marker.removeprefix("run by ").split()[0]
        assert (ROOT / test).is_file(), f"{block.where} names {test}, which does not exist"
        return
    if marker.startswith("compile-only:"):
        assert marker.removeprefix("compile-only:").strip(), f"{block.where}: say why it only compiles"
        return
    assert not marker, f"{block.where}: unknown docs-test marker {marker!r}"
    for name in SECRETS:
        monkeypatch.setenv(name, "docs-secret-0123456789")
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path / "data"))
    # the folders the examples name beside their file: a handbook page and a skills folder
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 30 days.\n")
    (tmp_path / "skills").mkdir()
    monkeypatch.chdir(tmp_path)
    exec(code, {"__name__": "docs_example", "__file__": str(tmp_path / "example.py")})


def test_every_page_with_python_has_its_blocks_found() -> None:
    """The block pattern finds what a reader sees: as many python fences as the pages have."""
    for path in all_pages():
        text = path.read_text()
        found = [b for b in blocks_of(text, path) if b.lang == "python"]
        fences = sum(1 for line in text.splitlines() if line.strip() == "```python")
        assert len(found) == fences, f"{path.relative_to(ROOT)}: {fences} python fences, {len(found)} read"
