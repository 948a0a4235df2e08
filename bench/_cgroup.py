"""A memory cgroup per benchmarked process: a hard limit as a container runtime sets it, and what it saw.

Resident size counts pages of mapped files, which the kernel may drop under pressure, so it
overstates what a process needs; a limit shows it: a process that needs more than the limit of
memory the kernel cannot reclaim is OOM-killed, one that only reads files runs, its page cache
reclaimed. Groups are made under the cgroup this process is in (so whatever accounts for it still
does), cgroup v1's memory controller or v2's, whichever the machine has (v2's path is untested: this
machine's v2 hierarchy has no memory controller); swap is limited too
(``memsw`` / ``memory.swap.max``) so it hides nothing. ``memory.stat`` holds current values only,
so a thread samples it for the peaks of anon (heap) and file (page cache) pages.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_V1 = Path("/sys/fs/cgroup/memory")
_MB = 2**20


def _own(hierarchy: str) -> str:
    """This process's cgroup path in the v1 hierarchy naming ``hierarchy`` ("" for v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (hierarchy and hierarchy in controllers.split(",")) or (not hierarchy and not controllers):
            return path.lstrip("/")
    return ""


def _v2_root() -> Path | None:
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "memory" in controllers.read_text().split():
            return root
    return None


def controller() -> tuple[str, Path] | None:
    """("v1" | "v2", the folder to make groups in), or None: no memory controller here."""
    if (_V1 / "memory.limit_in_bytes").exists():
        return "v1", _V1 / _own("memory")
    root = _v2_root()
    if root is not None:
        return "v2", root / _own("")
    return None


@dataclass
class Usage:
    """What a group saw, MB: its peak charge, how often it hit the limit, the sampled peaks by kind.

    ``failcnt`` stayed 0 on this machine's kernel (6.18, v1) even for a group whose process was
    OOM-killed, so the peak against the limit and ``refault_mb`` tell of reclaim: pages of files read
    again after the kernel dropped them (``workingset_refault_file``, cumulative).
    """

    peak_mb: float
    failcnt: int
    oom_kills: int
    refault_mb: float
    anon_mb: float
    cache_mb: float
    mapped_mb: float


class MemoryGroup:
    """A fresh cgroup with a memory limit (None: none, measured the same way); removed on ``close``."""

    def __init__(self, name: str, limit_mb: int | None) -> None:
        found = controller()
        if found is None:
            raise RuntimeError("no cgroup memory controller on this machine")
        self.version, parent = found
        self.path = parent / f"{name}-{os.getpid()}"
        if self.version == "v2":
            subtree = parent / "cgroup.subtree_control"
            if "memory" not in subtree.read_text().split():
                try:
                    subtree.write_text("+memory")
                except OSError as error:  # v2 lets no group with processes in it delegate
                    raise RuntimeError(
                        f"cannot enable the memory controller below {parent} ({error}): run the bench"
                        " from a leaf of a cgroup whose subtree_control has memory"
                    ) from error
        self.path.mkdir()
        if limit_mb is not None:
            limit = str(limit_mb * _MB)
            if self.version == "v1":
                self._write("memory.limit_in_bytes", limit)
                if (self.path / "memory.memsw.limit_in_bytes").exists():
                    self._write("memory.memsw.limit_in_bytes", limit)
            else:
                self._write("memory.max", limit)
                if (self.path / "memory.swap.max").exists():
                    self._write("memory.swap.max", "0")
        self._peaks = {"anon": 0, "cache": 0, "mapped": 0}
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _write(self, file: str, value: str) -> None:
        (self.path / file).write_text(value)

    def _read(self, file: str) -> str:
        return (self.path / file).read_text()

    def add(self, pid: int) -> None:
        """Moves ``pid`` into the group (a forked child before it execs: its memory from the start)."""
        self._write("cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        return [int(pid) for pid in self._read("cgroup.procs").split()]

    def _stat(self) -> dict[str, int]:
        stat = dict(line.split() for line in self._read("memory.stat").splitlines())
        if self.version == "v1":
            return {"anon": int(stat["rss"]), "cache": int(stat["cache"]), "mapped": int(stat["mapped_file"])}
        return {"anon": int(stat["anon"]), "cache": int(stat["file"]), "mapped": int(stat["file_mapped"])}

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            with contextlib.suppress(OSError, KeyError):
                for kind, value in self._stat().items():
                    self._peaks[kind] = max(self._peaks[kind], value)

    def usage(self) -> Usage:
        """The group's figures so far."""
        if self.version == "v1":
            peak = int(self._read("memory.max_usage_in_bytes"))
            failcnt = int(self._read("memory.failcnt"))  # a charge refused by the memory counter
            if (self.path / "memory.memsw.failcnt").exists():  # or by memory + swap, checked first
                failcnt += int(self._read("memory.memsw.failcnt"))
            control = dict(line.split() for line in self._read("memory.oom_control").splitlines())
            kills = int(control.get("oom_kill", 0))
        else:
            peak = int(self._read("memory.peak")) if (self.path / "memory.peak").exists() else 0
            events = dict(line.split() for line in self._read("memory.events").splitlines())
            failcnt, kills = int(events["max"]), int(events["oom_kill"])
        stat = dict(line.split() for line in self._read("memory.stat").splitlines())
        return Usage(
            peak_mb=peak / _MB,
            failcnt=failcnt,
            oom_kills=kills,
            refault_mb=int(stat.get("workingset_refault_file", 0)) * os.sysconf("SC_PAGE_SIZE") / _MB,
            anon_mb=self._peaks["anon"] / _MB,
            cache_mb=self._peaks["cache"] / _MB,
            mapped_mb=self._peaks["mapped"] / _MB,
        )

    def close(self) -> None:
        """Stops sampling, kills what is left in the group, removes it (a page-cache charge moves up).

        Left: a child of a process the limit killed, e.g. the index builder of an OOM-killed writer
        sharing its group, orphaned and still building; a container's end would kill it too.
        """
        self._stop.set()
        self._sampler.join()
        for _ in range(300):
            try:
                self.path.rmdir()
                return
            except OSError:  # a process still in it, or exiting
                for pid in self.pids():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
        self.path.rmdir()
