"""The benchmarks' own plumbing: they start from a plain shell, without an activated venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_find_the_temporal_binary_beside_the_interpreter_without_an_activated_venv() -> None:
    beside = Path(sys.executable).parent / "temporal"
    # a plain shell's PATH, without the venv's bin folder
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"PATH": "/usr/bin:/bin"}
    found = subprocess.run(
        [sys.executable, "-c", "import _server; print(_server.temporal_path())"],
        cwd=ROOT / "bench",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(beside)
