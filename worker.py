"""``python worker.py --app module:app``: a worker for an app; run as many replicas as you like."""

from __future__ import annotations

if __name__ == "__main__":
    from chamvi.cli import main

    main(["worker", *__import__("sys").argv[1:]])
