"""Where tool definitions come from: the definitions directory, the plugins the settings list, and the upstreams
its ``sources:`` declare (``gateway.sources.select``: OpenAPI documents, MCP servers).

Each is loaded on its own (``gateway.definitions.load``; a plugin's files are named ``<plugin>:<path>``), then
``combine`` makes one list of tools to build: an id declared in two places is one problem naming both, a
generated tool whose id is taken is a problem at its source that says how to rename it, and the ``overrides:`` of
the definitions directory change or disable tools declared elsewhere (generated ones too).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..definitions import checks
from ..definitions.load import Definitions, DefinitionsCache, load_definitions
from ..definitions.model import Scope, ToolDefinition
from ..definitions.parse import Override
from ..definitions.yamlbudget import YamlLimits
from ..errors import DefinitionsInvalid, Problem
from ..settings import Settings
from . import plugins as plugin_discovery
from .plugins import Plugin
from .select import SourceTools


@dataclass(frozen=True, eq=False)
class PluginDefinitions:
    plugin: Plugin
    definitions: Definitions


@dataclass(frozen=True, eq=False)
class Combined:
    """Every tool to build, with the plugin that declared it (None: the definitions directory)."""

    tools: tuple[tuple[ToolDefinition, PluginDefinitions | None], ...]
    problems: tuple[Problem, ...]  # of the plugins and of combining; the definitions directory's are its own
    digest: str


def load_plugins(settings: Settings, cache: DefinitionsCache,
                 limits: YamlLimits) -> tuple[tuple[PluginDefinitions, ...], list[Problem]]:
    """The definitions of the plugins ``settings.plugins`` lists, read from the distributions installed now."""
    if not settings.plugins:
        return (), []
    chosen, problems = plugin_discovery.selected(settings.plugins, plugin_discovery.installed())
    loaded = tuple(
        PluginDefinitions(p, load_definitions(p.directory, cache.plugin(p.name), limits=limits, label=f"{p.name}:"))
        for p in chosen if p.directory is not None
    )
    return loaded, problems


def load_all(settings: Settings, cache: DefinitionsCache | None = None) -> tuple[Definitions,
                                                                               tuple[PluginDefinitions, ...]]:
    """The definitions directory and the plugins the settings list; ``DefinitionsInvalid`` when a listed plugin
    is not installed or cannot be found."""
    cache = cache if cache is not None else DefinitionsCache()
    limits = YamlLimits.from_settings(settings)
    definitions = load_definitions(settings.definitions, cache, limits=limits)
    # Installed plugins are read again on every call: a reload serves an upgraded one.
    loaded, problems = load_plugins(settings, cache, limits)
    if problems:
        raise DefinitionsInvalid([*problems, *definitions.problems])
    return definitions, loaded


def combine(local: Definitions, loaded: Sequence[PluginDefinitions] = (), generated: SourceTools | None = None
            ) -> Combined:
    sources: list[tuple[PluginDefinitions | None, Definitions]] = [(None, local), *((p, p.definitions) for p in loaded)]
    problems = [problem for p in loaded for problem in p.definitions.problems]
    problems += _plugin_only_local(loaded)
    # Repeats inside one source were reported by its loader; here, the first of each id per source meets the others.
    firsts = []
    for _, definitions in sources:
        ids: dict[str, ToolDefinition] = {}
        for file in definitions.files:
            for tool in file.tools:
                ids.setdefault(tool.id, tool)
        firsts += ids.values()
    problems += checks.duplicate_ids(firsts)
    tools: dict[str, tuple[ToolDefinition, PluginDefinitions | None]] = {}
    for origin, definitions in sources:
        for tool in definitions.tools:
            tools.setdefault(tool.id, (tool, origin))  # in file order; a repeated id was reported above
    first_of = {tool.id: tool for tool in reversed(firsts)}
    for tool in generated.tools if generated else ():
        earlier = first_of.setdefault(tool.id, tool)
        if earlier is tool:
            tools[tool.id] = (tool, None)
        else:
            problems.append(_taken(tool, earlier, live=tool.source in generated.live))
    declared = set(first_of)
    for override in local.overrides:
        if override.tool not in declared:
            problems.append(override.problem("tool", f"override of tool '{override.tool}': no definitions file or "
                                                     "plugin declares it"))
        elif override.tool in tools:  # else not served already (it has problems, or an earlier override disabled it)
            tool, origin = tools[override.tool]
            if override.changes.get("enabled", True) is False:
                del tools[override.tool]
                continue
            changed = _apply(tool, override)
            tool_problems = checks.check_tool(changed)
            problems += [override.problem("tool", f"tool '{tool.id}' after this override: {p.message}")
                         for p in tool_problems]
            tools[override.tool] = (changed, origin)
    return Combined(tuple(tools.values()), tuple(problems), combined_digest(local, loaded, generated))


def _plugin_only_local(loaded: Sequence[PluginDefinitions]) -> list[Problem]:
    """Warnings at what a plugin's file declares that only the definitions directory may: `sources:` (a plugin
    ships its tools as files; an upstream is the admin's to bring in) and `overrides:` (the admin's changes to a
    plugin's tools). Neither is applied; the plugin's tools are served as written."""
    warnings = []
    for p in loaded:
        for file in p.definitions.files:
            warnings += [source.document.problem(["sources", source.index, "id"],
                                                 f"source '{source.id}' is not read: plugin '{p.plugin.name}' may "
                                                 "not declare sources (declare it in the definitions directory)",
                                                 severity="warning")
                         for source in file.sources if source.document is not None]
            warnings += [override.document.problem(["overrides", override.index, "tool"],
                                                   f"override of tool '{override.tool}' is not applied: only the "
                                                   "definitions directory's files may override tools",
                                                   severity="warning")
                         for override in file.overrides]
    return warnings


def combined_digest(local: Definitions, loaded: Sequence[PluginDefinitions] = (),
                    generated: SourceTools | None = None) -> str:
    """A digest of every file of every source (each file's name and content digest, in a fixed order) and of
    what the ``sources:`` generated: what a catalog's version is made of, however the catalog was built."""
    digest = hashlib.sha256(local.digest.encode())
    if generated is not None:
        digest.update(f"\0sources\0{generated.digest}".encode())
    for p in loaded:
        digest.update(f"\0{p.plugin.name}\0{p.plugin.version}\0{p.definitions.digest}".encode())
    return digest.hexdigest()


def _taken(tool: ToolDefinition, earlier: ToolDefinition, *, live: bool) -> Problem:
    """A generated tool whose id another tool has: a problem at its source, saying how to rename it. From a live
    upstream (``live``) a warning, and the tool is left out: an upstream that starts listing a name already taken
    must not stop every reload (as ``rules._passed_over``)."""
    line, column = earlier.document.position([*earlier.path, "id"]) if earlier.document else (1, 1)
    where = f"{earlier.file}:{line}:{column}"
    by = f"source '{earlier.source}' ({where})" if earlier.source else where
    return Problem(*_position(tool), f"source '{tool.source}': tool id '{tool.id}' is already declared by {by}: "
                                     f"rename this one (add `tools: {{{tool.upstream}: {{id: ...}}}}` to the source) "
                                     "or give the source a `prefix`" + ("; the tool is not served" if live else ""),
                   "warning" if live else "error")


def _position(tool: ToolDefinition) -> tuple[str, int, int]:
    line, column = tool.document.position(tool.path) if tool.document else (1, 1)
    return tool.file, line, column


# override -> (the tool it was applied to, the outcome). The loader returns the same objects for unchanged files,
# so a reload reuses the outcome, and the build cache (keyed by definition) reuses the tool built from it.
_applied: weakref.WeakKeyDictionary[Override, tuple[ToolDefinition, ToolDefinition]] = weakref.WeakKeyDictionary()


def _apply(tool: ToolDefinition, override: Override) -> ToolDefinition:
    before = _applied.get(override)
    if before is not None and before[0] is tool:
        return before[1]
    changed = _changed(tool, override)
    _applied[override] = (tool, changed)
    return changed


def _changed(tool: ToolDefinition, override: Override) -> ToolDefinition:
    fields: dict[str, Any] = {}
    for key, value in override.changes.items():
        if key == "scope":
            fields[key] = Scope(str(value).lower())
        elif key in ("toolsets", "tags"):
            fields[key] = tuple(value)
        elif key != "enabled":
            fields[key] = value
    return replace(tool, **fields)
