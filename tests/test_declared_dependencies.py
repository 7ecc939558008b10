"""Every third-party package that ``gateway/``, ``tests/`` and ``bench/`` import is declared in ``pyproject.toml``.

A package that only arrives as another one's dependency can vanish with that one's next release (schemathesis
stopped bringing ``openapi_spec_validator``; a fresh install then failed at collection). So each import is traced
to the distribution that provides it, and that distribution must be named: ``gateway/`` by the base dependencies
or an extra (an extra's package is imported only where its feature is asked for), ``tests/`` and ``bench/`` by
the base dependencies or any extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, f"unreadable requirement {requirement!r} in pyproject.toml"
    return re.sub(r"[-_.]+", "-", match.group()).lower()


BASE = {_name(r) for r in PYPROJECT["dependencies"]}
EXTRAS = {_name(r) for extra in PYPROJECT["optional-dependencies"].values() for r in extra}
OWN = {"tool-gateway"}  # the test extra names the project's own extras
WRITTEN_BY_TESTS = {"ftools"}  # a tool module tests/test_filters.py writes into its definitions directory


# What the tests install into the repository: the npm packages (tests/clients/node_modules holds Python files of its
# own, and directory names that would pass for local modules) and the federation matrix's Python frameworks, each
# with its own dependencies (tests/federation/peers.py).
INSTALLED = {"node_modules", ".peers"}


def _ours(paths: Iterable[Path]) -> list[Path]:
    """What the repository wrote of ``paths``, not what the tests install (``INSTALLED``)."""
    return [p for p in paths if not INSTALLED & set(p.relative_to(ROOT).parts)]


def _local_modules() -> set[str]:
    """Module names the repository provides itself: the package, tests' helpers (on pytest's pythonpath, each test
    folder too), bench scripts (which import each other and tests' helpers) and the shipped tools' python/."""
    names = {"gateway", *WRITTEN_BY_TESTS}
    for tree in ("tests", "bench", "tool-definitions"):
        names |= {p.stem for p in _ours((ROOT / tree).rglob("*.py"))}
        names |= {p.name for p in _ours((ROOT / tree).rglob("*")) if p.is_dir()}
    return names


def _imports(tree: Path) -> dict[str, str]:
    """Top-level third-party module imported below ``tree`` → the first file importing it."""
    local = {"gateway"} if tree.name == "gateway" else _local_modules()
    found: dict[str, str] = {}
    for path in sorted(_ours(tree.rglob("*.py"))):
        if "fixtures" in path.relative_to(tree).parts:  # definitions under test, some broken on purpose
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("tree", ["gateway", "tests", "bench"])
def test_every_imported_package_is_declared(tree):
    """Each third-party module imported under the tree comes from a distribution pyproject.toml names."""
    providers = packages_distributions()
    declared = BASE | EXTRAS | OWN
    missing = []
    for module, where in sorted(_imports(ROOT / tree).items()):
        names = {_name(d) for d in providers.get(module, ())}
        if not names:
            missing.append(f"{module} (imported in {where}): no installed distribution provides it")
        elif not names & declared:
            missing.append(f"{module} (imported in {where}): from {', '.join(sorted(names))}, not in pyproject.toml")
    assert not missing, "undeclared imports:\n" + "\n".join(missing)


def test_the_walk_sees_third_party_imports():
    """The import walk finds what gateway/ plainly imports (so the check above cannot pass by seeing nothing)."""
    found = _imports(ROOT / "gateway")
    assert {"yaml", "jinja2", "starlette", "mcp"} <= found.keys()
    assert "gateway" not in found and "json" not in found
