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
import re
from pathlib import Path
from types import CodeType

import pytest

from tests.support.docs import README, ROOT, Block, all_pages, blocks_of

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


def slug(heading: str) -> str:
    """The anchor MkDocs (and GitHub) give a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def test_the_readme_links_reach_files_and_headings_that_exist() -> None:
    """MkDocs' strict build checks docs/'s links; the README is outside it, so it is checked here."""
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        target, _, anchor = link.partition("#")
        path = (ROOT / target) if target else README
        assert path.exists(), f"README links to {link!r}: no such file"
        if anchor:
            lines = path.read_text().splitlines()
            headings = [slug(line.lstrip("#")) for line in lines if line.startswith("#")]
            assert anchor in headings, f"README links to {link!r}: no such heading in {target or 'README.md'}"
