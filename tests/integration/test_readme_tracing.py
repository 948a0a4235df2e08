"""docs/guides/tracing.md's example runs as written: a refund with an approval, traced to a collector."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from tests.support.docs import python_files
from tests.support.otlp_collector import Collector

ROOT = Path(__file__).parents[2]


def example() -> str:
    return python_files("guides/tracing.md")["traced_worker.py"]


def test_the_readme_tracing_example_exports_the_run_trace_it_prints(client: Client, tmp_path: Path) -> None:
    (tmp_path / "traced_worker.py").write_text(example())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        metrics = f"127.0.0.1:{sock.getsockname()[1]}"
    collector = Collector()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "CHAMVI_METRICS_ADDRESS": metrics,
        "CHAMVI_DATA": str(tmp_path / "data"),
    }
    try:
        ran = subprocess.run(
            [sys.executable, "traced_worker.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        collector.close()
    assert ran.returncode == 0, ran.stderr[-3000:]
    status, trace_id = ran.stdout.strip().split(" | trace ")
    assert status == "completed"
    spans = b"".join(collector.bodies("/v1/traces"))
    assert bytes.fromhex(trace_id) in spans
    for name in (
        b"refund request",
        b"RunWorkflow:AgentRun",
        b"chat demo",
        b"execute_tool refund",
        b"refunds-worker",
    ):
        assert name in spans, name
    assert b"A-17" not in spans  # the payload stays out of the spans
