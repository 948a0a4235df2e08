"""chamvi's modules import each other in one direction: no circle, and no domain package reaching up.

Read from the source with ``ast`` rather than from ``sys.modules``, so that an import Python never runs
counts too. Every import counts, wherever it stands:

- under ``if TYPE_CHECKING:``: a type names what its module is about; a circle that only mypy sees
  is still two modules that cannot be understood one without the other;
- inside a function: a lazy import that breaks a circle at import time moves the circle to the first
  call, it does not take it out of the design. A lazy import for speed (a heavy optional dependency,
  a command that should answer at once) is fine: it points down like any other.

One kind does not count: an import inside a module's own ``__getattr__`` (PEP 562). It runs only when
a user asks the module for that name: the alias that keeps an old import path working after a name
moved up and out of a package (``chamvi.state.state_tools``, ``chamvi.knowledge_store.searcher_of``),
or a face's lazy export (``chamvi.cli.POLL_SECONDS``). No module of chamvi may ask for a name that
way: a test below holds that.

An import of ``a.b.c`` from outside ``a.b`` runs ``a/b/__init__.py`` first, so it is also an arrow to
``a.b``: a circle through a package's ``__init__`` fails at import time like any other. The root
``chamvi/__init__.py`` is the exception: every module stands inside it, and it loads its names lazily.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# where each import name's files stand (pyproject installs workflows/ and activities/ under chamvi)
PACKAGES = {
    "chamvi": ROOT / "chamvi",
    "chamvi.workflows": ROOT / "workflows",
    "chamvi.activities": ROOT / "activities",
}

# The App and the lifecycle that builds and runs it: a domain package is built by them, never the reverse.
ABOVE_THE_DOMAIN = (
    "chamvi.app",
    "chamvi.worker_state",
    "chamvi._lifecycle",
    "chamvi.plugin",
    "chamvi.runtime",
)

# The subpackages that hold one domain each. Not here: chamvi.http and chamvi.cli are entry points
# that stand above the App; chamvi.workflows and chamvi.activities are what the App registers.
DOMAIN_PACKAGES = (
    "chamvi.knowledge",
    "chamvi.knowledge_store",
    "chamvi.skills",
    "chamvi.vectors",
    "chamvi.state",
    "chamvi.conversations",
    "chamvi.providers",
    "chamvi.senders",
    "chamvi.models",
)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _aliases(tree: ast.Module) -> set[ast.AST]:
    """The nodes of a module-level ``__getattr__``: old import paths kept working."""
    return {
        inner
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
        for inner in ast.walk(node)
    }


def _imported(module: str, tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Each chamvi module that ``module`` names in an import, with the line."""
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if node in aliases:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".") if _is_package(module) else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                # `from chamvi import _constants` names a module; `from chamvi.app import App` a name in one
                yield (f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base), node.lineno


def _graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: first line that does}."""
    graph: dict[str, dict[str, int]] = {m: {} for m in MODULES}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target, line in _imported(module, tree):
            while target and target not in MODULES:  # `import chamvi.x.y` where y is a name: chamvi.x
                target = target.rpartition(".")[0]
            if not target or target == module:
                continue
            graph[module].setdefault(target, line)
            package = target.rpartition(".")[0]
            # a package's __init__ runs before its submodule, unless the importer already stands inside it
            while package != "chamvi" and package in MODULES and not (module + ".").startswith(package + "."):
                graph[module].setdefault(package, line)
                package = package.rpartition(".")[0]
    return graph


def _circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    inside = set(component)
    arrows = [
        f"  {a} -> {b} ({MODULES[a].relative_to(ROOT)}:{line})"
        for a in component
        for b, line in sorted(graph[a].items())
        if b in inside
    ]
    return "\n".join([f"circle of {len(component)} modules:", *arrows])


def test_the_import_graph_is_read_whole() -> None:
    graph = _graph()
    assert graph["chamvi.app"], "chamvi.app imports nothing: the reader is broken"
    from_import = "`from chamvi import _constants` names a module"
    assert "chamvi._constants" in graph["chamvi.telemetry._otel"], from_import
    # a relative import resolves against the package (chamvi/knowledge/embedders/__init__.py: `from ._base`)
    assert "chamvi.knowledge.embedders._base" in graph["chamvi.knowledge.embedders"]


def test_no_module_of_chamvi_imports_itself_back_through_others() -> None:
    graph = _graph()
    found = _circles(graph)
    circles = [_describe(component, graph) for component in found]
    assert not circles, "import circles (type-only and function-local imports count):\n" + "\n".join(circles)


def test_no_module_of_chamvi_imports_a_name_through_an_old_path_alias() -> None:
    """An alias (a module ``__getattr__``) serves users' old imports; chamvi imports where names live."""
    served: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {
            alias.asname or alias.name
            for node in _aliases(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        if names:
            served[module] = names
    assert served, "no alias found: the reader is broken"
    through_alias = [
        f"{module} imports {name!r} from {node.module} ({MODULES[module].relative_to(ROOT)}:{node.lineno})"
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module in served
        for name in (a.name for a in node.names)
        if name in served[node.module]
    ]
    assert not through_alias, "\n".join(through_alias)


def test_names_moved_out_of_a_package_stay_importable_from_their_old_paths() -> None:
    from chamvi.knowledge.standalone import Knowledge as OldKnowledge
    from chamvi.knowledge_standalone import Knowledge
    from chamvi.knowledge_store import searcher_of as old_searcher_of
    from chamvi.state import state_tools as old_state_tools
    from chamvi.state.tools import state_tools
    from chamvi.worker_state import searcher_of

    assert (OldKnowledge, old_searcher_of, old_state_tools) == (Knowledge, searcher_of, state_tools)


def _path_up(graph: dict[str, dict[str, int]], start: str) -> list[str] | None:
    """The imports that lead from ``start`` to the App or its lifecycle (or chamvi's face), if any."""
    came_from: dict[str, str | None] = {start: None}
    queue = [start]
    for module in queue:
        if module in ABOVE_THE_DOMAIN or module == "chamvi":
            path = [module]
            while (previous := came_from[path[-1]]) is not None:
                path.append(previous)
            return path[::-1]
        for target in graph[module]:
            if target not in came_from:
                came_from[target] = module
                queue.append(target)
    return None


def test_no_domain_package_imports_the_app_or_the_lifecycle_above_it() -> None:
    """Directly or through another module: a domain package is built by the App, never the reverse."""
    graph = _graph()
    domain = [m for m in graph if (m + ".").startswith(tuple(p + "." for p in DOMAIN_PACKAGES))]
    assert "chamvi.knowledge.index" in domain
    upward = [" -> ".join(path) for module in sorted(domain) if (path := _path_up(graph, module))]
    assert not upward, "a domain package reaches the App, its lifecycle or chamvi's face:\n" + "\n".join(
        upward
    )
