"""Child processes that die with the process that started them (Linux's ``PR_SET_PDEATHSIG``).

A worker killed with SIGKILL runs no cleanup, so a child it started (the Temporal dev server of
``chamvi dev``, an index build) would live on without it: a build, for minutes, holding its memory
beside the next worker's. Elsewhere than Linux this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Asks the kernel to send ``signum`` to this process when the thread that started it ends."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
