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
    assert "gateway.catalog.snapshot" in GRAPH["gateway.invoke"]
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
    above = {"gateway.invoke", "gateway.catalog.build", "gateway.catalog.snapshot", "gateway.runtime.reload",
             "gateway.cli.main", "gateway.definitions.load"}
    reached = _reachable(binding)
    assert not reached & above
    assert not {m for m in reached if m.startswith(("gateway.server", "gateway.loop"))}


# How a catalog is built: what the modules that only read a catalog must not reach.
BUILD_SIDE = ("gateway.catalog.build", "gateway.bindings", "gateway.sources", "gateway.filters")


@pytest.mark.parametrize("module", sorted(name for name in MODULES if name.startswith("gateway.formats")))
def test_formats_read_the_snapshot_not_the_build(module):
    """A provider format renders the catalog's snapshot types (``gateway.catalog.snapshot``) and reaches nothing
    of how a catalog is built: neither the build, nor bindings, sources or filters, even indirectly."""
    reached = _reachable(module)
    assert not {m for m in reached for side in BUILD_SIDE if m == side or m.startswith(side + ".")}


@pytest.mark.parametrize("module", ["gateway.definitions.load", "gateway.definitions.checks"])
def test_definitions_know_nothing_of_bindings_or_the_catalog(module):
    """Loading and checking definitions reach no binding module, no build cache and no catalog."""
    reached = _reachable(module)
    assert not {m for m in reached if m.startswith("gateway.bindings")}
    assert not reached & {"gateway.catalog.build", "gateway.catalog.cache", "gateway.invoke"}


# The packages from the bottom up (docs/architecture.md draws them): a module may import its own package and
# those of lower layers, never one above nor a neighbour of its own layer (the surfaces know nothing of each other). Top-level modules count as packages of their own; server/'s
# subpackages are apart from the surfaces' common ground (server/http) and from what assembles them. What an
# approval requires (approvals.config) is read by the settings and the build, far below the check invoke runs.
LAYERS = [
    {"gateway.errors", "gateway.daemon", "gateway.events"},
    {"gateway.state", "gateway.client_channel", "gateway.identity", "gateway.approvals.config"},
    {"gateway.context", "gateway.settings"},
    {"gateway.secrets"},
    {"gateway.schema", "gateway.templates", "gateway.content"},
    {"gateway.definitions"},
    {"gateway.upstream"},
    {"gateway.bindings"},
    {"gateway.filters"},
    {"gateway.sources"},
    {"gateway.catalog"},
    {"gateway.results", "gateway.formats", "gateway.search", "gateway.approvals"},
    {"gateway.invoke"},
    {"gateway"},  # the public face: __version__ and the library's entry points
    {"gateway.contract"},
    {"gateway.runtime"},
    {"gateway.observe"},
    {"gateway.loop"},
    {"gateway.server.http"},
    {"gateway.server.rest", "gateway.server.mcp", "gateway.server.admin", "gateway.server.chat", "gateway.server.client",
     "gateway.server.landing", "gateway.server.demo_api", "gateway.server.metrics"},
    {"gateway.server.connections"},  # a person's connection signs in as the console does (server.admin.signin)
    {"gateway.server.oauth_client"},  # the one /oauth/connect and /oauth/callback: the gateway's and a person's
    {"gateway.server"},  # the app that puts the surfaces side by side
    {"gateway.cli"},
    {"gateway.__main__"},
]
LAYER = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """The package a module belongs to in the layer picture: the longest one ``LAYERS`` names."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYER:
            return ".".join(parts[:end])
    raise AssertionError(f"{module} is in no layer of LAYERS")


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module of a higher layer, or of another package of the same layer, as 'importer ->
    imported'."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if _unit(target) != _unit(name) and LAYER[_unit(target)] >= LAYER[_unit(name)])


def test_every_module_has_a_layer():
    """A new package is placed in the picture before it is used (else the order would not hold it)."""
    for name in MODULES:
        _unit(name)


def test_no_package_imports_a_higher_one():
    """The data flows one way: definitions -> catalog -> invoke -> surfaces, with nothing pointing back up."""
    assert _upward(GRAPH) == []


def test_the_order_check_sees_an_upward_import():
    """The check is not vacuous: the definitions loader importing the catalog build, the HTTP plumbing importing a
    surface, or one surface another, is reported."""
    graph = {**GRAPH, "gateway.definitions.load": GRAPH["gateway.definitions.load"] | {"gateway.catalog.build"},
             "gateway.server.http.front": GRAPH["gateway.server.http.front"] | {"gateway.server.rest.surface"},
             "gateway.server.mcp.fast": GRAPH["gateway.server.mcp.fast"] | {"gateway.server.rest.fast"}}
    assert _upward(graph) == ["gateway.definitions.load -> gateway.catalog.build",
                              "gateway.server.http.front -> gateway.server.rest.surface",
                              "gateway.server.mcp.fast -> gateway.server.rest.fast"]
