"""The layers hold: workflows load no I/O client, activities/ holds activities only."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import chamvi.activities
import chamvi.workflows

IO_CLIENTS = ("qdrant_client", "openai", "numpy", "fastembed", "httpx")


def test_importing_every_workflow_module_loads_no_io_client() -> None:
    workflows = [f"chamvi.workflows.{m.name}" for m in pkgutil.iter_modules(chamvi.workflows.__path__)]
    probe = (
        "import importlib, json, sys\n"
        f"for name in {workflows!r}: importlib.import_module(name)\n"
        f"print(json.dumps([m for m in {IO_CLIENTS!r} if m in sys.modules]))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert len(workflows) >= 3
    assert json.loads(loaded.stdout) == []


def test_the_activities_package_holds_activities_and_the_classes_that_own_them_only() -> None:
    for info in pkgutil.iter_modules(chamvi.activities.__path__):
        module = importlib.import_module(f"chamvi.activities.{info.name}")
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            assert inspect.isclass(value), f"{module.__name__}.{name} is no activity class"
            public = [m for n, m in vars(value).items() if not n.startswith("_") and callable(m)]
            assert public, f"{module.__name__}.{name} defines no activity"
            for method in public:
                assert hasattr(method, "__temporal_activity_definition"), (
                    f"{module.__name__}.{name}.{method.__name__} is no activity"
                )


def test_every_exported_name_is_what_its_module_defines_even_after_every_module_is_imported() -> None:
    """A submodule named like an export would shadow it once imported (``chamvi.extract`` did)."""
    import chamvi

    for info in pkgutil.walk_packages(chamvi.__path__, "chamvi."):
        if info.name.startswith("chamvi.cli") or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    for name in chamvi.__all__:
        module = importlib.import_module(chamvi._EXPORTS[name])
        assert getattr(chamvi, name) is getattr(module, name), name


WORKFLOWS_DIR = Path(__file__).parents[2] / "workflows"
AGENT_RUN_MAX_LINES = 500


def test_the_agent_run_workflow_module_stays_short_enough_to_read_in_one_sitting() -> None:
    """Issue 35: the activity calls, approvals and run record live in helpers named after the UI."""
    lines = len((WORKFLOWS_DIR / "agent_run.py").read_text().splitlines())
    assert lines <= AGENT_RUN_MAX_LINES, (
        f"workflows/agent_run.py has {lines} lines, past {AGENT_RUN_MAX_LINES}: move machinery into "
        "a helper module (_model_calls, _tool_calls, _run_record, ...) rather than growing the workflow"
    )


def _sibling_imports(module: str) -> set[str]:
    """The ``chamvi.workflows`` modules ``module`` imports relatively, and theirs, transitively."""
    found: set[str] = set()
    todo = [module]
    while todo:
        tree = ast.parse((WORKFLOWS_DIR / f"{todo.pop()}.py").read_text())
        for node in ast.walk(tree):
            name = node.module if isinstance(node, ast.ImportFrom) and node.level == 1 else None
            if name is not None and name not in found:
                found.add(name)
                todo.append(name)
    return found


def test_every_module_agent_run_imports_passes_the_sandbox_with_it() -> None:
    """A helper left out would be imported afresh in each run's sandbox, a second copy of its classes."""
    from chamvi.plugin import RUN_MODULES_PASSTHROUGH

    helpers = {f"chamvi.workflows.{name}" for name in _sibling_imports("agent_run")}
    assert {"chamvi.workflows._tool_calls", "chamvi.workflows._approvals"} <= helpers
    assert helpers | {"chamvi.workflows.agent_run"} == set(RUN_MODULES_PASSTHROUGH)


def test_type_checkers_see_each_public_name_from_the_module_that_loads_it() -> None:
    """The facade lists its names twice (``_PUBLIC`` at run time, the ``TYPE_CHECKING`` imports for
    type checkers): a name in one list only is lazily loadable but untyped, or typed but missing."""
    import chamvi

    tree = ast.parse(Path(chamvi.__file__).read_text())
    guarded = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    typed = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name  # `X as X`: a re-export, which mypy's no_implicit_reexport wants
    }
    assert typed == chamvi._EXPORTS
