"""The Catalog: an immutable snapshot of every tool, ready to serve.

``build_catalog`` is the second phase after loading: it resolves bindings, derives and compiles schemas, and
either returns a complete Catalog or raises with every problem. Nothing is served from a half-built catalog; a
reload builds a new one beside the old and swaps one reference.
"""

from __future__ import annotations

import difflib
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bindings import BindingProblems, BuildEnv, Executor, builder
from ..definitions.load import Definitions
from ..definitions.model import Scope, ToolDefinition
from ..definitions.yamlbudget import YamlLimits
from ..errors import DefinitionsInvalid, Problem, UnknownTool
from ..events import NULL_BUS, EventBus
from ..filters.chains import FilterChains, build_chains, shared_filters
from ..schema.fastcheck import Check, lazy_check
from ..schema.published import compile_validator
from ..settings import Settings
from ..sources import PluginDefinitions, combine, combined_digest
from ..sources.expansion import SourceEnv
from ..sources.plugins import Plugin
from ..sources.select import SourceTools, expand_sources
from ..state import SharedState
from ..state.memory import MemoryState
from .cache import BuildCache
from .examples import example_problems
from .hidden_arguments import visible_schema, with_hidden
from .per_file import FileBuild, FileBuilds, build_files, per_file
from .prompts_resources import EMPTY, Content, build_content

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

NO_ARGUMENTS: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# How long a build waits for its `sources:` upstreams (at most half its own budget): a down one is served stale.
SOURCES_WAIT_S = 10.0


@dataclass(frozen=True, eq=False, slots=True)
class Tool:
    definition: ToolDefinition
    input_schema: Mapping[str, Any]
    validator: Draft202012Validator
    output_validator: Draft202012Validator | None
    # "server" and/or "client" executors, by where the tool may run.
    executors: Mapping[str, Executor]
    # Says True, fast, for arguments that plainly match a simple input schema (gateway.schema.fastcheck).
    fast_check: Check | None = None
    script: Path | None = None
    # The output schema the binding derived (a Python function's return annotation) when the YAML gives none.
    derived_output_schema: Mapping[str, Any] | None = None
    # How the LLM learns the output schema: the tool's return_schema, else the settings' (description|result|none).
    return_schema: str = "none"
    # Whether a call may talk to its client while it runs (``Bound.talks``): MCP answers it as SSE.
    talks: bool = False
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        """The schema results are checked against: declared in YAML, else derived by the binding, else None."""
        declared = self.definition.output_schema
        return declared if declared is not None else self.derived_output_schema

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value computed once per tool. A reload reuses the Tool objects of unchanged definitions
        (``BuildCache``), so per-tool renderings memoised here survive into the next catalog."""
        try:
            return self._memo[key]
        except KeyError:
            return self._memo.setdefault(key, compute())  # a race computes twice, and keeps one

    @property
    def scope(self) -> Scope:
        return self.definition.scope

    def describe(self) -> dict[str, Any]:
        """The gateway's own listing entry (GET /tools); computed once and shared, so never modify it."""
        return self.memo("describe", self._describe)

    def _describe(self) -> dict[str, Any]:
        d = self.definition
        entry: dict[str, Any] = {
            "id": d.id,
            "name": d.name,
            "user_description": d.user_description,
            "ai_description": d.ai_description,
            "scope": d.scope.value,
            "input_schema": self.input_schema,
        }
        if self.output_schema is not None:
            entry["output_schema"] = self.output_schema
        entry["tags"] = list(d.tags)
        entry["toolsets"] = list(d.toolsets)
        entry["annotations"] = dict(d.annotations)
        if d.return_direct:
            entry["return_direct"] = True
        return entry


@dataclass(frozen=True, eq=False)
class Catalog:
    tools: Mapping[str, Tool]
    version: str
    root: Path
    settings: Settings
    warnings: tuple[Problem, ...] = ()
    filters: FilterChains = field(default_factory=lambda: FilterChains({}))  # every tool's, outermost first
    plugins: tuple[Plugin, ...] = ()  # the plugins it serves tools of
    events: EventBus = NULL_BUS  # where calls on this catalog are told (gateway.events)
    # Each `sources:` entry as /status shows it: id, kind, file, tools, health, stale, error, last_refresh.
    sources: tuple[Mapping[str, Any], ...] = ()
    state: SharedState = field(default_factory=MemoryState)  # where its rate limits are counted (gateway.state)
    # Its tools file by file, when it was built so (gateway.catalog.per_file): comparing catalogs costs what changed.
    parts: tuple[FileBuild, ...] = ()
    content: Content = EMPTY  # its prompts and resources (gateway.catalog.prompts_resources)
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    # One lock per key, so that a value computed in a worker thread (a listing of 10,000 tools: tens of ms) never
    # holds up the event loop asking for another; re-entrant: a value may be built from other memoised values.
    _memo_locks: dict[Any, threading.RLock] = field(default_factory=dict, repr=False)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # guards _memo_locks only

    def get(self, tool_id: str) -> Tool:
        tool = self.tools.get(tool_id)
        if tool is None:
            raise UnknownTool(tool_id, difflib.get_close_matches(tool_id, self.tools, n=3, cutoff=0.6))
        return tool

    def select(self, *, toolsets: Iterable[str] = (), tags: Iterable[str] = (), side: str | None = None,
               ids: Iterable[str] | None = None) -> list[Tool]:
        """Tools in any of ``toolsets``, with any of ``tags``, runnable on ``side`` ("server"/"client")."""
        toolsets, tags = set(toolsets), set(tags)
        wanted = set(ids) if ids is not None else None
        return [
            tool for tool in self.tools.values()
            if (not toolsets or toolsets & set(tool.definition.toolsets))
            and (not tags or tags & set(tool.definition.tags))
            and (side is None or side in tool.executors)
            and (wanted is None or tool.id in wanted)
        ]

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value computed once per catalog (listings per format): a catalog never changes, so neither do they."""
        try:
            return self._memo[key]
        except KeyError:
            pass
        with self._memo_lock:
            lock = self._memo_locks.setdefault(key, threading.RLock())
        with lock:
            if key not in self._memo:
                try:
                    self._memo[key] = compute()
                finally:  # asked again, the value is found without a lock; a failure is computed afresh
                    with self._memo_lock:
                        self._memo_locks.pop(key, None)
            return self._memo[key]

    def memoised(self, key: Any) -> Any:
        """The value ``memo`` computed for ``key``, or None when none was yet (never computes)."""
        return self._memo.get(key)


def build_catalog(definitions: Definitions, settings: Settings, env: BuildEnv | None = None,
                  cache: BuildCache | None = None, plugins: Sequence[PluginDefinitions] = ()) -> Catalog:
    """Resolve every binding and compile every schema, or raise ``DefinitionsInvalid`` with every problem.

    Tools that loaded cleanly are built even when others did not, so one run reports load and build problems
    together. A running gateway passes its ``cache`` so that a reload rebuilds only the tools whose inputs
    changed — and, when no file's tools depend on another's, walks only the files that changed
    (``gateway.catalog.per_file``); the version is a hash of content either way. ``plugins`` add their tools
    (``gateway.sources``).
    """
    env = env or BuildEnv(settings=settings, root=definitions.root)
    cache = cache or BuildCache()
    generated = expand_sources(definitions.sources, _source_env(definitions, settings, env))
    # Python modules are part of what the catalog serves: a change there is a new version.
    env.python_digest = cache.python_digest(env)
    content = build_content(definitions, env, generated.status)
    if per_file(definitions, plugins):
        return _build_per_file(definitions, settings, env, cache, generated, content)
    cache.file_builds = FileBuilds()  # what it held may not describe the files this build leaves behind
    combined = combine(definitions, plugins, generated)
    every_problem = [*definitions.problems, *generated.problems, *combined.problems]
    env.warnings = [p for p in every_problem if p.severity != "error"]
    problems: list[Problem] = [p for p in every_problem if p.severity == "error"]
    tools: dict[str, Tool] = {}
    version = hashlib.sha256(combined.digest.encode())
    version.update(env.python_digest.encode())
    version.update(content.digest.encode())
    problems += content.problems
    envs = {id(p): _plugin_env(p, env, cache) for p in plugins}
    for plugin_env in envs.values():
        version.update(plugin_env.python_digest.encode())
    for definition, origin in combined.tools:
        try:
            tool = cache.tool(definition, envs[id(origin)] if origin else env, _build_tool)
        except BindingProblems as exc:
            problems += exc.problems
            continue
        tools[tool.id] = tool
        if tool.script:
            version.update(cache.script_digest(tool).encode())
    cache.retain(tool.definition for tool in tools.values())
    filters, filter_problems = _filters(combined.tools, env, envs, settings)
    problems += filter_problems
    if problems:
        raise DefinitionsInvalid(sorted(problems, key=lambda p: (p.file, p.line, p.column)))
    return Catalog(tools, version.hexdigest()[:16], definitions.root, settings, (*env.warnings, *content.warnings),
                   filters, tuple(p.plugin for p in plugins), env.events, generated.status, env.state,
                   content=content)


def _build_per_file(definitions: Definitions, settings: Settings, env: BuildEnv, cache: BuildCache,
                    generated: SourceTools, content: Content) -> Catalog:
    """The catalog of a definitions directory whose files stand alone, from per-file results: the same
    catalog, problems and version as the path above gives it."""
    shared, problems = shared_filters(env, settings.toolset_filters)
    built = build_files(definitions, env, cache, shared, _build_tool)
    env.warnings = built.warnings
    version = hashlib.sha256(combined_digest(definitions, (), generated).encode())
    version.update(env.python_digest.encode())
    version.update(content.digest.encode())
    for part in built.parts:
        for tool in part.scripts:
            version.update(cache.script_digest(tool).encode())
    problems = [*built.problems, *problems, *content.problems]
    if problems:
        raise DefinitionsInvalid(sorted(problems, key=lambda p: (p.file, p.line, p.column)))
    return Catalog(built.tools, version.hexdigest()[:16], definitions.root, settings,
                   (*env.warnings, *content.warnings),
                   FilterChains(built.chains), (), env.events, generated.status, env.state, parts=built.parts,
                   content=content)


def _source_env(definitions: Definitions, settings: Settings, env: BuildEnv) -> SourceEnv:
    wait_s = min(SOURCES_WAIT_S, settings.reload_timeout_s / 2)
    return SourceEnv(settings=settings, root=definitions.root, limits=YamlLimits.from_settings(settings),
                     wait_s=wait_s, deadline=time.monotonic() + wait_s, gateway=env.bridge, events=env.events,
                     connect=env.connect_sources)


def _plugin_env(loaded: PluginDefinitions, env: BuildEnv, cache: BuildCache) -> BuildEnv:
    """What a plugin's tools are built with: its directory as root, its package trusted, its own memo."""
    plugin = loaded.plugin
    # replace() keeps the warnings list itself: one list for the whole build.
    plugin_env = replace(env, root=loaded.definitions.root, package=plugin.package, modules=plugin.modules, memo={})
    # Its version and every module of its package make its digest: a change (an upgrade, an edit of an editable
    # install) is a new catalog version and imports its modules afresh (bindings.python).
    files = cache.files.tree(plugin.package_dir, "*.py") if plugin.package_dir else cache.python_digest(plugin_env)
    plugin_env.python_digest = hashlib.sha256(f"{plugin.version}\0{files}".encode()).hexdigest()
    return plugin_env


def _filters(tools: Sequence[tuple[ToolDefinition, PluginDefinitions | None]], env: BuildEnv,
             envs: Mapping[int, BuildEnv], settings: Settings) -> tuple[FilterChains, list[Problem]]:
    """Every tool's filters, resolved on every build (a filter's module may change while its tools do not).

    The settings' and toolsets' filters resolve under the definitions directory's trust; a plugin tool's own
    filters under its plugin's, and run innermost, as a tool's own filters do.
    """
    chains, problems = build_chains([t if o is None else replace(t, filters=()) for t, o in tools], env,
                                    settings.toolset_filters)
    by_tool = dict(chains.by_tool)
    own_only = replace(settings, filters=(), toolset_filters={}, return_schema="none")
    for definition, origin in tools:
        if origin is None or not definition.filters:
            continue
        inner, inner_problems = build_chains([replace(definition, return_schema="none")],
                                             replace(envs[id(origin)], settings=own_only))
        problems += inner_problems
        by_tool[definition.id] = (*by_tool.get(definition.id, ()), *inner.of(definition.id))
    return FilterChains(by_tool), problems


def _build_tool(definition: ToolDefinition, env: BuildEnv) -> Tool:
    problems: list[Problem] = []
    executors: dict[str, Executor] = {}
    derived: Mapping[str, Any] | None = None
    derived_output: Mapping[str, Any] | None = None
    script: Path | None = None
    talks = False
    for kind in definition.binding:
        try:
            bound = builder(kind)(definition, env)
        except BindingProblems as exc:
            problems += exc.problems
            continue
        executor = bound.executor
        if definition.hidden_arguments:
            executor = with_hidden(executor, definition.hidden_arguments, definition.id)
        executors["client" if kind == "browser" else "server"] = executor
        derived = derived or bound.input_schema
        derived_output = derived_output or bound.output_schema
        script = bound.files[0] if kind == "browser" and bound.files else script
        talks = talks or bound.talks
    if problems:
        raise BindingProblems(problems)
    input_schema = visible_schema(definition.input_schema or derived or NO_ARGUMENTS, definition.hidden_arguments)
    output = definition.output_schema if definition.output_schema is not None else derived_output
    # Positional, in Tool's field order: made for each of 10,000 tools on a start.
    tool = Tool(definition, input_schema, compile_validator(input_schema),
                compile_validator(output) if output is not None else None, executors, lazy_check(input_schema),
                script, derived_output, definition.return_schema or env.settings.return_schema, talks)
    # Examples are checked against the built schemas: a Python tool's are derived from its signature only here.
    if definition.examples:
        problems = example_problems(definition, tool.validator, tool.output_validator)
        if problems:
            raise BindingProblems(problems)
    return tool

