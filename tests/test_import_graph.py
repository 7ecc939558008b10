"""The package's import graph has no cycle, and its arrows point down the design's picture.

Every import counts, wherever it stands: at module top, inside a function, or under ``TYPE_CHECKING`` (an
annotation that needs its importer is a dependency too, and the next edit turns it into a runtime one).
A module's arrow to its own package's ``__init__`` is counted only where it imports from it: importing
``gateway.a.b`` first runs ``gateway/a/__init__.py``, but by then the package is already being imported, so that
order is no cycle.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "gateway"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imported(name: str, path: Path) -> set[str]:
    """The package's modules that the module ``name`` at ``path`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from . import checks` imports the module gateway.definitions.checks, not a name of gateway/__init__.py.
            submodules = {f"{base}.{alias.name}" for alias in node.names} & MODULES.keys()
            found |= submodules if len(submodules) == len(node.names) else {*submodules, base}
    return {target for target in found if target in MODULES} - {name}


GRAPH = {name: _imported(name, path) for name, path in MODULES.items()}


def test_the_walk_sees_the_imports():
    """The walk finds known arrows (relative, absolute, to a submodule), so an empty graph cannot pass."""
    assert "gateway.catalog.build" in GRAPH["gateway.invoke"]
    assert "gateway.bindings.python" in GRAPH["gateway.bindings"] or "gateway.errors" in GRAPH["gateway.bindings"]
    assert {"gateway.bindings.imports", "gateway.bindings"} <= GRAPH["gateway.bindings.python"]


def test_no_import_cycle():
    """No module of the package reaches itself through imports."""
    try:
        TopologicalSorter(GRAPH).prepare()
    except CycleError as exc:
        pytest.fail("import cycle: " + " -> ".join(exc.args[1]))


def _reachable(start: str) -> set[str]:
    seen, pending = set(), [start]
    while pending:
        for target in GRAPH[pending.pop()] - seen:
            seen.add(target)
            pending.append(target)
    return seen


@pytest.mark.parametrize("binding", sorted(name for name in MODULES if name.startswith("gateway.bindings")))
def test_bindings_do_not_import_the_call_path(binding):
    """A binding module reaches neither invoke, the catalog, the loader, the surfaces nor the LLM loop, even
    indirectly."""
    above = {"gateway.invoke", "gateway.catalog.build", "gateway.runtime.reload", "gateway.cli.main", "gateway.definitions.load"}
    reached = _reachable(binding)
    assert not reached & above
    assert not {m for m in reached if m.startswith(("gateway.server", "gateway.loop"))}


@pytest.mark.parametrize("module", ["gateway.definitions.load", "gateway.definitions.checks"])
def test_definitions_know_nothing_of_bindings_or_the_catalog(module):
    """Loading and checking definitions reach no binding module, no build cache and no catalog."""
    reached = _reachable(module)
    assert not {m for m in reached if m.startswith("gateway.bindings")}
    assert not reached & {"gateway.catalog.build", "gateway.catalog.cache", "gateway.invoke"}

