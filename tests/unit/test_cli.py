"""The command line without a server: argument errors, `check`, and how `chamvi dev` starts Temporal."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chamvi.cli import cli
from chamvi.constants import SEARCH_ATTRIBUTES
from chamvi.dev import DevServerConfig, search_attribute_specs


def invoke(*args: str) -> Result:
    """Runs the CLI in a thread of its own, so its ``asyncio.run`` never touches the test's loop."""
    results: list[Result] = []
    thread = threading.Thread(target=lambda: results.append(CliRunner().invoke(cli, list(args))))
    thread.start()
    thread.join(60)
    assert results, "the command did not finish within 60 s"
    return results[0]


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_bad_json_payload_fails_before_connecting() -> None:
    result = invoke("dispatch", "support", "--payload", "{not json", "--temporal-address", "127.0.0.1:1")
    assert "--payload is not valid JSON" in one_line_error(result)


def test_an_unreachable_server_names_the_address_and_the_fix() -> None:
    address = f"127.0.0.1:{free_port()}"
    message = one_line_error(invoke("runs", "list", "--address", address))
    assert message == (
        f"Error: cannot reach Temporal at {address}: start it with `chamvi dev` or set TEMPORAL_ADDRESS"
    )


def test_an_unknown_status_is_refused_by_the_parser() -> None:
    result = invoke("runs", "list", "--status", "sleeping")
    assert result.exit_code == 2
    assert "'sleeping' is not one of" in result.output


def test_check_refuses_an_app_reference_without_an_attribute() -> None:
    message = one_line_error(invoke("check", "--app", "examples.support.app"))
    assert "must look like 'module:attribute'" in message


def test_check_reports_a_module_that_cannot_be_imported() -> None:
    message = one_line_error(invoke("check", "--app", "examples.no_such_module:app"))
    assert "cannot import app module 'examples.no_such_module'" in message


def test_check_reports_an_attribute_that_is_not_an_app() -> None:
    message = one_line_error(invoke("check", "--app", "examples.support.app:support"))
    assert "is not a chamvi App (found Agent)" in message


def test_check_reports_a_module_that_fails_while_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "chamvi_broken_app.py").write_text("raise RuntimeError('no database configured')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = one_line_error(invoke("check", "--app", "chamvi_broken_app:app"))
    assert message == (
        "Error: importing app 'chamvi_broken_app:app' raised RuntimeError: no database configured"
    )


def test_check_of_the_example_lists_its_agent_and_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAMVI_APP", raising=False)
    result = invoke("check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "examples.support.app:app: ok, 1 agent(s), channels: console",
        "  support: model local/demo, tools: lookup_order, refund_order (effect), send_reply (effect)",
    ]


def test_dev_flags_come_from_the_search_attribute_constants(tmp_path: Path) -> None:
    assert search_attribute_specs() == [
        "ChamviAgent=Keyword",
        "ChamviStatus=Keyword",
        "ChamviChannel=Keyword",
        "ChamviTainted=Bool",
    ]
    assert len(search_attribute_specs()) == len(SEARCH_ATTRIBUTES)
    command = DevServerConfig(data=tmp_path, port=7300).command("temporal")
    assert command[:3] == ["temporal", "server", "start-dev"]
    assert command[command.index("--db-filename") + 1] == str(tmp_path / "temporal.db")
    assert command[command.index("--port") + 1] == "7300"
    assert command[command.index("--ui-port") + 1] == "8300"
    flags = [command[i + 1] for i, part in enumerate(command) if part == "--search-attribute"]
    assert flags == search_attribute_specs()


def test_dev_refuses_a_port_in_use_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))  # dev points the app's data here; restored after
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = invoke("dev", "--data", str(tmp_path), "--port", str(port), "--ui-port", str(free_port()))
    message = one_line_error(result)
    assert f"port {port} is in use" in message and "--port" in message
    assert not (tmp_path / "temporal.log").exists()


def test_dev_refuses_a_data_folder_another_dev_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fcntl = pytest.importorskip("fcntl")
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    with (tmp_path / "dev.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        ports = ["--port", str(free_port()), "--ui-port", str(free_port())]
        result = invoke("dev", "--data", str(tmp_path), *ports)
    assert one_line_error(result) == (
        f"Error: another `chamvi dev` (pid 4242) uses {tmp_path}: stop it or pass another --data"
    )
    assert not (tmp_path / "temporal.log").exists()
