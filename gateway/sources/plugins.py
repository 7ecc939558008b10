"""Plugins: installed distributions that ship tools.

A distribution declares an entry point in the group ``tool_gateway.plugins``; its value ``package:directory``
names a directory inside the package laid out like a definitions directory (YAML files, ``python/``,
``scripts/``). Only the plugins the settings list (``plugins: [name]``, ``["*"]`` for all) are loaded:
installing a package is not consent to serve its tools.

The installed distributions are read again on every build, so a reload serves a plugin upgraded with
``pip install -U`` without a restart. Finding a plugin's directory never runs its code (``find_spec`` of a
top-level package reads the file system only).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from ..errors import Problem

GROUP = "tool_gateway.plugins"
SETTINGS_FILE = "<settings>"  # where problems of the settings point (they have no YAML position)


@dataclass(frozen=True)
class Plugin:
    """One installed plugin: its entry point and where its definitions directory is."""

    name: str  # the entry point's name, as the settings list it
    distribution: str
    version: str
    package: str  # the top-level import package: the plugin's Python code is trusted inside it
    modules: str  # dotted name of its definitions directory: its python/ modules are <modules>.python.<name>
    directory: Path | None  # None when it cannot be found; ``error`` says why
    error: str = ""
    package_dir: Path | None = None  # the entry point's package: its modules are part of the catalog's version

    @property
    def label(self) -> str:
        return f"{self.name} ({self.distribution} {self.version})"


def installed() -> list[Plugin]:
    """Every installed plugin, by name; read afresh (an upgrade since the last call is seen)."""
    importlib.invalidate_caches()  # the metadata and path finders cache directory listings
    found: dict[str, Plugin] = {}
    for entry in entry_points(group=GROUP):
        found.setdefault(entry.name, _plugin(entry))  # two distributions with one name: the first on sys.path
    return sorted(found.values(), key=lambda p: p.name)


def _plugin(entry: EntryPoint) -> Plugin:
    dist = entry.dist
    distribution, version = (dist.name, dist.version) if dist is not None else ("?", "?")
    package = entry.module.split(".")[0]
    modules = ".".join(part for part in (entry.module, entry.attr) if part)

    def broken(message: str) -> Plugin:
        return Plugin(entry.name, distribution, version, package, modules, None, message)

    try:
        spec = importlib.util.find_spec(entry.module)
    except (ImportError, ValueError) as exc:
        return broken(f"cannot find package '{entry.module}': {exc}")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        return broken(f"entry point value {entry.value!r} does not name a package")
    directory = Path(locations[0], *(entry.attr or "").split(".")) if entry.attr else Path(locations[0])
    if not directory.is_dir():
        return broken(f"entry point value {entry.value!r}: no directory {directory}")
    return Plugin(entry.name, distribution, version, package, modules, directory, package_dir=Path(locations[0]))


def selected(wanted: tuple[str, ...], available: list[Plugin]) -> tuple[list[Plugin], list[Problem]]:
    """The plugins the setting ``plugins`` lists, and a problem for each listed one that is missing or broken."""
    if "*" in wanted:
        chosen = list(available)
    else:
        by_name = {p.name: p for p in available}
        chosen = [by_name[name] for name in dict.fromkeys(wanted) if name in by_name]
    problems = [
        Problem(SETTINGS_FILE, 1, 1, f"setting 'plugins': plugin '{name}' is not installed (installed: "
                                     f"{', '.join(p.name for p in available) or 'none'})")
        for name in dict.fromkeys(wanted) if name != "*" and name not in {p.name for p in available}
    ]
    problems += [Problem(f"{p.name}:", 1, 1, f"plugin {p.label}: {p.error}") for p in chosen if p.directory is None]
    return [p for p in chosen if p.directory is not None], problems
