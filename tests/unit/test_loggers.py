"""chamvi's log lines come from loggers named after their modules, so logging is set up per module."""

from __future__ import annotations

import importlib
import logging
import pkgutil

import chamvi


def test_every_module_logs_under_its_own_name() -> None:
    misnamed = []
    for info in pkgutil.walk_packages(chamvi.__path__, "chamvi."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        log = vars(module).get("log")
        if isinstance(log, logging.Logger) and log.name != module.__name__:
            misnamed.append(f"{module.__name__}: {log.name}")
    assert misnamed == []
