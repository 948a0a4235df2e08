"""The code blocks of the docs site (``docs/``) and the README, read where a reader reads them.

Tests run the examples from these files rather than from copies, so an example that stops working fails a
test. A page is named by its path below ``docs/`` (``"guides/agents.md"``); a section by its ``## `` heading.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# a fenced block, with the HTML comment right above it when there is one (`<!-- docs-test: ... -->`)
_BLOCK = re.compile(
    r"(?:<!--\s*docs-test:\s*(?P<marker>[^>]*?)\s*-->\s*\n)?"
    r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, its text, the page and line it starts on, and its marker."""

    lang: str
    body: str
    path: Path
    line: int
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def path_of(name: str) -> Path:
    """``docs/<name>``, or the README for ``"README.md"``."""
    return README if name == "README.md" else DOCS / name


def page(name: str) -> str:
    """The text of ``docs/<name>`` (or of the README)."""
    return path_of(name).read_text()


def section(name: str, heading: str | None = None) -> str:
    """The page ``docs/<name>``, or its ``## heading`` section up to the next ``## `` heading."""
    text = page(name)
    if heading is None:
        return text
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 1)
    return text[start : end if end != -1 else len(text)]


def blocks_of(text: str, path: Path) -> list[Block]:
    """The fenced blocks of ``text`` (from ``path``), indented ones (inside a list item) included."""
    found = []
    for m in _BLOCK.finditer(text):
        indent = m.group("indent")
        body = "".join(
            line[len(indent) :] if line.startswith(indent) else line
            for line in m.group("body").splitlines(True)
        )
        found.append(
            Block(m.group("lang"), body, path, text.count("\n", 0, m.start("indent")) + 1, m.group("marker"))
        )
    return found


def blocks(name: str, heading: str | None = None, lang: str | None = None) -> list[Block]:
    """The blocks of a docs page or of one of its sections, of one language when ``lang`` is given."""
    found = blocks_of(section(name, heading), path_of(name))
    return [b for b in found if lang is None or b.lang == lang]


def all_pages() -> list[Path]:
    """README.md and every page of the docs site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def shell_block(name: str, starting: str) -> str:
    """The one ``sh`` block of page ``name`` that holds the text ``starting``."""
    (found,) = [b.body for b in blocks(name, lang="sh") if starting in b.body]
    return found


def python_files(name: str, heading: str | None = None) -> dict[str, str]:
    """The python blocks of a page or section that name a file on their first line, by that name."""
    files: dict[str, str] = {}
    for block in blocks(name, heading, lang="python"):
        first, _, body = block.body.partition("\n")
        if first.startswith("# ") and first[2:].strip().endswith(".py"):
            files[first[2:].strip()] = body
    return files


def python_module(name: str, filename: str, folder: Path, heading: str | None = None) -> ModuleType:
    """The page's python file ``filename``, written to ``folder`` and imported as a reader would."""
    files = python_files(name, heading)
    (folder / filename).write_text(files[filename])
    spec = importlib.util.spec_from_file_location(f"docs_{Path(filename).stem}", folder / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
