"""The file a running ``chamvi dev`` leaves in its data folder, so ``chamvi mcp`` finds the stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chamvi.cli.mcp import beside_dev_stack
from chamvi.dev import STACK_FILE, read_stack, write_stack
from chamvi.settings import Settings


def test_a_running_stack_is_found_and_fills_only_what_nothing_else_chose(tmp_path: Path) -> None:
    write_stack(tmp_path, "localhost:7300", "dev", "chamvi-dev")
    stack = {"address": "localhost:7300", "namespace": "dev", "task_queue": "chamvi-dev"}
    assert read_stack(tmp_path) == stack
    found = beside_dev_stack(Settings(), tmp_path)
    assert (found.temporal_address, found.temporal_namespace, found.task_queue) == (
        "localhost:7300",
        "dev",
        "chamvi-dev",
    )
    given = beside_dev_stack(Settings(temporal_address="temporal:7233"), tmp_path)
    assert given.temporal_address == "temporal:7233"  # an address given wins, and nothing is taken


def test_a_stack_whose_process_is_gone_or_a_folder_without_one_is_not_found(tmp_path: Path) -> None:
    assert read_stack(tmp_path) is None
    program = [sys.executable, "-c", "import os; print(os.getpid())"]
    gone = subprocess.run(program, capture_output=True, text=True, check=True)
    stack = {"address": "localhost:7300", "namespace": "dev", "task_queue": "q", "pid": int(gone.stdout)}
    (tmp_path / STACK_FILE).write_text(json.dumps(stack))
    assert read_stack(tmp_path) is None
    (tmp_path / STACK_FILE).write_text("not json")
    assert read_stack(tmp_path) is None
