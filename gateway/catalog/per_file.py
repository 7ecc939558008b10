"""A catalog built file by file, so that a rebuild after an edit costs what changed, not what the catalog holds.

When the tools come from the definitions directory alone (no plugins, no ``sources:``, no ``overrides:``, no id
declared twice), no file's tools depend on another file's: each file's tools, their filter chains and the warnings
and problems of building them are that file's ``FileBuild``. The loader returns the very same ``FileDefinitions``
for an unchanged file, so the next build reuses its ``FileBuild`` whole, and builds only the files that came or
changed. Reuse needs everything else a build reads to be the same (``FileBuilds.key``: the settings, the
definitions directory and its ``python/`` modules); a file whose build met a problem is built again every time
(its module may have come since), and so is a file with a browser script (the script may change under it: the
build cache rebuilds its tool only if it did).

The catalog is then assembled in file order from the per-file results: the same tools, chains, warnings,
problems and version (a hash of per-file digests, ``gateway.sources.combined_digest``) as a build from scratch.
``changed_tools`` compares two catalogs by their parts, so the reload event's list of changed tools also costs
what changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..bindings import BindingProblems
from ..errors import Problem

if TYPE_CHECKING:
    from ..bindings import BuildEnv
    from ..definitions.load import Definitions
    from ..definitions.parse import FileDefinitions
    from ..filters.call import Filter
    from ..filters.chains import SharedFilters


class _Cache(Protocol):
    """What is used of ``gateway.catalog.cache.BuildCache`` (which holds a ``FileBuilds``)."""

    file_builds: FileBuilds

    def tool(self, definition: Any, env: BuildEnv, build: Callable[[Any, BuildEnv], Any]) -> Any: ...

    def retain(self, definitions: Iterable[Any]) -> None: ...

    def forget(self, definitions: Iterable[Any]) -> None: ...


@dataclass(frozen=True, eq=False, slots=True)
class FileBuild:
    """What building one file's tools gave."""

    file: FileDefinitions
    tools: Mapping[str, Any]  # id -> gateway.catalog.snapshot.Tool, in file order
    chains: Mapping[str, tuple[Filter, ...]]  # the non-empty filter chains of its tools
    warnings: tuple[Problem, ...]
    problems: tuple[Problem, ...]
    scripts: tuple[Any, ...]  # its tools with a browser script, whose digest is part of the version
    reusable: bool  # no problem and no script: the next build may take it whole for the same file


@dataclass
class FileBuilds:
    """The latest build's ``FileBuild`` of each file, in file order, and what they were built with."""

    key: tuple[Any, ...] | None = None
    parts: tuple[FileBuild, ...] = ()
    tools: dict[str, Any] = field(default_factory=dict)  # the parts' tools, in file order
    chains: dict[str, tuple[Filter, ...]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Assembled:
    tools: dict[str, Any]
    chains: dict[str, tuple[Filter, ...]]
    warnings: list[Problem]
    problems: list[Problem]
    parts: tuple[FileBuild, ...]


def per_file(definitions: Definitions, plugins: Sequence[Any]) -> bool:
    """Whether no file's tools depend on another's, so that the catalog can be built file by file."""
    return not (plugins or definitions.repeated or any(f.sources or f.overrides for f in definitions.files))


def build_files(definitions: Definitions, env: BuildEnv, cache: _Cache, shared: SharedFilters,
                build_tool: Callable[[Any, BuildEnv], Any]) -> Assembled:
    """Every file's tools, reusing the latest build's results for the files that did not change."""
    state: FileBuilds = cache.file_builds
    key = (env.settings, str(definitions.root), env.python_digest)
    fresh = state.key != key or not state.parts
    before = () if state.key != key else state.parts
    files = definitions.files
    # The common edit keeps every file where it was: the part at the same place is the one to reuse (or, for a
    # file of the same name, the one it replaces). A file added, removed or renamed looks the others up by file.
    in_place = len(before) == len(files)
    by_file: dict[int, FileBuild] | None = None
    parts: list[FileBuild] = []
    for index, file in enumerate(files):
        built = before[index] if in_place else None
        if built is not None and built.file is not file:
            if built.file.file != file.file:
                in_place = False
            built = None
        if built is None and not in_place:
            if by_file is None:
                by_file = {id(part.file): part for part in before}
            built = by_file.get(id(file))  # the state holds its files: an id found is that very file's
        if built is None or not built.reusable:
            built = _build_file(file, env, cache, shared, build_tool)
        parts.append(built)
    changed = [index for index, part in enumerate(parts) if not in_place or part is not before[index]]
    if fresh:  # the cache may hold tools of files this state never saw (a build of another kind came first)
        # The tools built, not every buildable definition: one that failed is not cached, and counting it would
        # let as many stale tools stay (retain prunes only when it holds more than it keeps).
        cache.retain(tool.definition for part in parts for tool in part.tools.values())
    elif in_place:  # only the files replaced can have left tools behind
        cache.forget(d for index in changed if before[index].file is not parts[index].file
                     for d in before[index].file.buildable)
    else:
        present = {id(part.file) for part in parts}
        cache.forget(d for part in before if id(part.file) not in present for d in part.file.buildable)
    tools, chains = _merged(before, parts, changed, in_place, state)
    warnings = [p for p in definitions.problems if p.severity != "error"]
    problems = [p for p in definitions.problems if p.severity == "error"]
    for part in parts:
        if part.warnings:
            warnings += part.warnings
        if part.problems:
            problems += part.problems
    state.key, state.parts, state.tools, state.chains = key, tuple(parts), tools, chains
    return Assembled(tools, chains, warnings, problems, state.parts)


def _merged(before: Sequence[FileBuild], parts: Sequence[FileBuild], changed: Sequence[int], in_place: bool,
            state: FileBuilds) -> tuple[dict[str, Any], dict[str, tuple[Filter, ...]]]:
    """Every part's tools (in file order) and chains: the latest build's, with the changed parts' put in place
    when each declares the same ids in the same order as the part it replaces, else merged anew."""
    if in_place and len(changed) < len(parts) and all(list(parts[i].tools) == list(before[i].tools)
                                                      for i in changed):
        tools, chains = dict(state.tools), dict(state.chains)
        for index in changed:
            tools.update(parts[index].tools)  # the same keys: each stays where it was
            for tool_id in before[index].chains:
                del chains[tool_id]
        for index in changed:
            chains.update(parts[index].chains)
        return tools, chains
    tools, chains = {}, {}
    for part in parts:
        tools.update(part.tools)
        chains.update(part.chains)
    return tools, chains


def _build_file(file: FileDefinitions, env: BuildEnv, cache: _Cache, shared: SharedFilters,
                build_tool: Callable[[Any, BuildEnv], Any]) -> FileBuild:
    outer, env.warnings = env.warnings, []  # the warnings this file's tools report, kept with them
    problems: list[Problem] = []
    tools: dict[str, Any] = {}
    try:
        for definition in file.buildable:
            try:
                tool = cache.tool(definition, env, build_tool)
            except BindingProblems as exc:
                problems += exc.problems
                continue
            tools[tool.id] = tool
        chains = {}
        for definition in file.buildable:
            chain = shared.chain(definition, env, problems)
            if chain:
                chains[definition.id] = chain
        warnings = tuple(env.warnings)
    finally:
        env.warnings = outer
    scripts = tuple(tool for tool in tools.values() if tool.script)
    return FileBuild(file, tools, chains, warnings, tuple(problems), scripts, not problems and not scripts)


def changed_tools(before: Any, now: Any) -> tuple[list[str], list[str], list[str]]:
    """(added, removed, modified) ids from catalog ``before`` to ``now``: a tool is modified when the catalogs
    hold different objects for it. Catalogs built file by file are compared by the parts that differ."""
    if before is now:
        return [], [], []
    old_tools: Mapping[str, Any] = before.tools
    new_tools: Mapping[str, Any] = now.tools
    if before.parts and now.parts:
        old_parts = {id(part) for part in before.parts}
        new_parts = {id(part) for part in now.parts}
        old = {t for part in before.parts if id(part) not in new_parts for t in part.tools}
        new = {t for part in now.parts if id(part) not in old_parts for t in part.tools}
        candidates = old | new
    else:
        old, new = set(old_tools), set(new_tools)
        candidates = old & new
    return (sorted(t for t in new if t not in old_tools), sorted(t for t in old if t not in new_tools),
            sorted(t for t in candidates if t in old_tools and t in new_tools and old_tools[t] is not new_tools[t]))
