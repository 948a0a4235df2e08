"""The file a running ``chamvi dev`` leaves in its data folder, so ``chamvi mcp`` finds the stack."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi import FastAPI

from chamvi._dev import STACK_FILE, read_stack, write_stack
from chamvi.cli import cli
from chamvi.cli._common import beside_dev_stack
from chamvi.cli._follow import Api, dev_api
from chamvi.http.server import ACCESS_LOGGER, server
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


def test_the_stack_records_its_ui_api_and_token_file_and_following_finds_the_api_there(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "api-token"
    token_file.write_text("dev-token\n")
    write_stack(
        tmp_path,
        "localhost:7300",
        "default",
        "chamvi",
        ui="http://localhost:8300",
        api_url="http://127.0.0.1:3300",
        token_file=token_file,
    )
    stack = read_stack(tmp_path)
    assert stack is not None
    assert (stack["ui"], stack["api_url"], stack["token_file"]) == (
        "http://localhost:8300",
        "http://127.0.0.1:3300",
        str(token_file),
    )
    assert dev_api(None, None, tmp_path, None) == Api("http://127.0.0.1:3300", "dev-token")
    # a port given (--api-port, CHAMVI_API_PORT) wins over the stack's
    assert dev_api(None, None, tmp_path, 3400) == Api("http://127.0.0.1:3400", "dev-token")


def test_a_client_command_connects_to_the_dev_stack_of_its_data_folder(tmp_path: Path) -> None:
    write_stack(tmp_path, "127.0.0.1:1", "default", "chamvi")
    env = {
        "CHAMVI_DATA": str(tmp_path),
        "TEMPORAL_ADDRESS": None,
        "TEMPORAL_CONFIG_FILE": str(tmp_path / "none"),
    }
    result = CliRunner().invoke(cli, ["runs", "list"], env=env)
    assert result.exit_code == 1
    assert "cannot reach Temporal at 127.0.0.1:1" in result.output
    given = CliRunner().invoke(cli, ["runs", "list", "--address", "127.0.0.1:2"], env=env)
    assert "cannot reach Temporal at 127.0.0.1:2" in given.output


def test_the_api_access_log_goes_to_a_file_and_not_to_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger(ACCESS_LOGGER)
    before = (list(logger.handlers), logger.propagate)
    try:
        server(FastAPI(), access_log=tmp_path / "api-access.log")
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/runs?token=x", "1.1", 200)
        for handler in logger.handlers:
            handler.flush()
        assert "GET /runs HTTP/1.1" in (tmp_path / "api-access.log").read_text()
        captured = capsys.readouterr()
        assert "GET" not in captured.out + captured.err
    finally:
        for handler in logger.handlers:
            handler.close()
        logger.handlers[:], logger.propagate = before
