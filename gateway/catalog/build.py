"""Building the catalog: definitions, sources and filters made into an immutable ``Catalog`` (gateway.catalog.snapshot).

``build_catalog`` is the second phase after loading: it resolves bindings, derives and compiles schemas, and
either returns a complete Catalog or raises with every problem. Nothing is served from a half-built catalog; a
reload builds a new one beside the old and swaps one reference.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..approvals.config import asks_caller
from ..bindings import BindingProblems, BuildEnv, builder
from ..context import Executor
from ..definitions.load import Definitions
from ..definitions.model import ToolDefinition
from ..definitions.yamlbudget import YamlLimits
from ..errors import DefinitionsInvalid, Problem
from ..filters.chains import FilterChains, build_chains, shared_filters
from ..schema.fastcheck import lazy_check
from ..schema.published import compile_validator
from ..settings import Settings
from ..sources import PluginDefinitions, combine, combined_digest
from ..sources.expansion import SourceEnv
from ..sources.select import SourceTools, expand_sources
from .cache import BuildCache
from .examples import example_problems
from .hidden_arguments import visible_schema, with_hidden
from .per_file import FileBuilds, build_files, per_file
from .prompts_resources import build_content
from .snapshot import Catalog, Content, Tool

NO_ARGUMENTS: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# How long a build waits for its `sources:` upstreams (at most half its own budget): a down one is served stale.
SOURCES_WAIT_S = 10.0


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
    talks = talks or asks_caller(definition, env.settings.approvals)
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

