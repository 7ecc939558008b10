"""The ``sources:`` framework: each source's kind expands it (``gateway.sources.expansion``), then the same rules
for every kind turn what the upstream offers into tool definitions.

    expand     every source's kind at once, each in a daemon thread, waited for until one deadline; a kind that
               does not return in time (or raises) leaves the last expansion this process had for the same
               declaration in place, marked stale, or no tools and a warning: a down upstream never blocks a build.
               A build that may not connect (a draft check) expands only what reaches nothing outside; an upstream
               is checked as declared, with the tools this process last listed for the same upstream settings
    select     ``include`` then ``exclude`` (names or ``fnmatch`` globs, matched against the upstream's names)
    name       id = ``tools.<name>.id``, else ``prefix`` + name; an id that is not a valid tool id (a letter, then
               letters, digits, ``_`` or ``-``; 64 characters at most) is a problem that suggests a fix: never
               truncated, never renamed behind the admin's back
    override   ``tools.<name>``: name, descriptions, toolsets, tags, scope, annotations, timeout_s, offer
    defaults   ``toolsets``, ``tags``, ``timeout_s`` of the source for every tool that does not set its own
    hide       ``hidden.<name>.<parameter>``: a fixed value, or ``{context: user|conversation_id|...}``; the
               parameter must be in the operation's input schema (and a fixed value must match it). The catalog
               removes it from what the LLM sees and merges it into the arguments at call time
               (``gateway.catalog.hidden_arguments``), for every kind

The definitions generated from a declaration and an expansion's ``tools`` are kept (weakly, by the declaration,
which the loader returns unchanged for an unchanged file; and by the identity of the tools tuple, which a kind
returns again when nothing changed upstream), so a reload with nothing new upstream rebuilds nothing.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import import_module
from typing import Any

from .. import daemon
from ..definitions import checks
from ..definitions.model import Scope, SourceDeclaration, ToolDefinition
from ..errors import Problem
from .expansion import SOURCE_KINDS, Expansion, SourceEnv, UpstreamTool

TOOL_ID = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")
MAX_ID = 64
# What a hidden argument may be filled from: fields of the call's context (gateway.context.CallContext).
HIDDEN_CONTEXT = ("user", "conversation_id", "tool_call_id", "caller", "surface")
_GLOB = re.compile(r"[*?\[]")
_KEEP_LAST = 256  # expansions remembered for a source whose kind later fails or runs late


@dataclass(frozen=True, eq=False)
class SourceTools:
    """Every source's tools, ready to combine with the hand-written ones, and what ``/status`` shows of them."""

    tools: tuple[ToolDefinition, ...]
    problems: tuple[Problem, ...]
    status: tuple[Mapping[str, Any], ...]
    digest: str  # of every generated definition and each source's freshness: part of the catalog's version
    live: frozenset[str] = frozenset()  # ids of the sources whose tools someone other than the admin lists


@dataclass(frozen=True, eq=False)
class _Generated:
    tools: tuple[ToolDefinition, ...]
    problems: tuple[Problem, ...]
    digest: str
    origins: tuple[tuple[UpstreamTool, ToolDefinition], ...] = ()  # each definition and what it was made from


# The last expansion per declaration content, for a kind that fails or runs late; shared by a process's builds
# (an abandoned build may still write here: a lock, and only whole values).
_last: OrderedDict[str, Expansion] = OrderedDict()
_last_lock = threading.Lock()
# The last expansion per upstream (a kind and its settings, whatever selects and renames its tools): what a draft
# check shows of an upstream it may not connect to. Under _last_lock, bounded as _last.
_last_upstream: OrderedDict[str, Expansion] = OrderedDict()
# declaration -> (the expansion's tools, definitions generated from the pair)
_generated: weakref.WeakKeyDictionary[SourceDeclaration, tuple[tuple[UpstreamTool, ...], _Generated]] = (
    weakref.WeakKeyDictionary())


def expand_sources(sources: Sequence[SourceDeclaration], env: SourceEnv) -> SourceTools:
    """Expand every source (concurrently, until ``env.deadline``) and generate its tool definitions."""
    if not sources:
        return SourceTools((), (), (), "")
    unconnected = {} if env.connect else {id(source): problems for source in sources
                                          if (problems := _unconnected(source, env)) is not None}
    started = {id(source): daemon.start(lambda s=source: _expand(s, env), f"source {source.id}")
               for source in sources if id(source) not in unconnected}
    tools: list[ToolDefinition] = []
    problems: list[Problem] = []
    status: list[Mapping[str, Any]] = []
    digest = hashlib.sha256()
    for source in sources:
        expansion = (_outcome(source, started[id(source)], env) if id(source) in started
                     else _last_listed(source, unconnected[id(source)]))
        try:
            generated = _generate_once(source, expansion)
        except Exception as exc:  # noqa: BLE001 — a bug met on what one upstream offers fails that source, not the build
            failed = source.problem([source.kind], f"generating its tools failed: {type(exc).__name__}: {exc}",
                                    severity="warning" if _live(source) else "error")
            generated = _Generated((), (failed,), "failed")
        tools += generated.tools
        problems += expansion.problems
        problems += generated.problems
        status.append(_status(source, expansion, generated))
        # Freshness is part of the version: a source turning stale (or fresh again) is a new catalog, seen on /status.
        digest.update(f"{source.id}\0{generated.digest}\0{expansion.status.get('stale')}\0"
                      f"{expansion.status.get('error')}\0".encode())
    return SourceTools(tuple(tools), tuple(problems), tuple(status), digest.hexdigest(),
                       frozenset(source.id for source in sources if _live(source)))


def _key(source: SourceDeclaration) -> str:
    return json.dumps([source.file, source.raw], sort_keys=True, default=str)


def _upstream_key(source: SourceDeclaration) -> str:
    return json.dumps([source.kind, source.settings], sort_keys=True, default=str)


def _remember(table: OrderedDict[str, Expansion], key: str, expansion: Expansion) -> None:
    table[key] = expansion
    table.move_to_end(key)
    while len(table) > _KEEP_LAST:
        table.popitem(last=False)


def _unconnected(source: SourceDeclaration, env: SourceEnv) -> tuple[Problem, ...] | None:
    """For a build that may not connect: the declaration's problems found without connecting, or None when its
    kind reaches nothing outside the definitions directory (it is expanded as usual)."""
    module = SOURCE_KINDS.get(source.kind)
    check = getattr(import_module(module), "unconnected", None) if module else None
    return check(source, env) if check is not None else None


def _last_listed(source: SourceDeclaration, problems: tuple[Problem, ...]) -> Expansion:
    """A source a draft check may not connect to: its declaration's problems and, when it has none, the tools this
    process last listed for the same upstream settings (the served catalog's), or none and a warning."""
    if problems:
        return Expansion(problems=problems, status={"health": "unchecked", "stale": False,
                                                    "error": "its declaration has problems"})
    with _last_lock:
        last = _last_upstream.get(_upstream_key(source))
    if last is not None:
        return last
    error = ("not read by a check, which never starts an upstream's process or fetches its document: it is read "
             "when the file is saved and the catalog reloads")
    return Expansion(problems=(source.problem([source.kind], error, key=True, severity="warning"),),
                     status={"health": "unchecked", "stale": False, "error": error})


def _expand(source: SourceDeclaration, env: SourceEnv) -> Expansion:
    module = SOURCE_KINDS.get(source.kind)
    if module is None:  # the schema names the kinds; a kind in the schema but not here is a bug
        return Expansion(problems=(source.problem([source.kind], f"unknown source kind '{source.kind}'", key=True),))
    expansion = import_module(module).expand(source, env)
    with _last_lock:
        _remember(_last, _key(source), expansion)
        _remember(_last_upstream, _upstream_key(source), expansion)
    return expansion


def _outcome(source: SourceDeclaration, future: Any, env: SourceEnv) -> Expansion:
    """The kind's expansion, or (it failed or is late) the last one known, stale, or none."""
    try:
        return future.result(max(env.deadline - time.monotonic(), 0))
    except TimeoutError:
        error = f"the upstream was not read within {env.wait_s:g} s"
    except Exception as exc:  # noqa: BLE001 — a kind's bug or an unexpected failure: this source's problem, not the build's
        error = f"reading the upstream failed: {type(exc).__name__}: {exc}"
    with _last_lock:
        last = _last.get(_key(source))
    if last is not None:
        return Expansion(last.tools, last.problems, {**last.status, "health": "stale", "stale": True, "error": error})
    return Expansion(problems=(source.problem([source.kind], f"{error}; it serves no tools until it is read",
                                              key=True, severity="warning"),),
                     status={"health": "down", "stale": False, "error": error})


def _generate_once(source: SourceDeclaration, expansion: Expansion) -> _Generated:
    before = _generated.get(source)
    if before is not None and before[0] is expansion.tools:
        return before[1]
    generated = generate(source, expansion, before[1] if before else None)
    _generated[source] = (expansion.tools, generated)
    return generated


def _status(source: SourceDeclaration, expansion: Expansion, generated: _Generated) -> dict[str, Any]:
    kind_status = dict(expansion.status)
    stale = bool(kind_status.get("stale", False))
    return {"id": source.id, "kind": source.kind, "file": source.file, "tools": len(generated.tools),
            **kind_status, "health": kind_status.get("health", "stale" if stale else "ok"), "stale": stale,
            "error": kind_status.get("error"), "last_refresh": kind_status.get("last_refresh")}


def generate(source: SourceDeclaration, expansion: Expansion, previous: _Generated | None = None) -> _Generated:
    """The tool definitions of one source, from its expansion, and the problems met (see the module's steps).

    A definition of ``previous`` (this declaration's last generation) is reused for an upstream tool that did not
    change, so that the build reuses its built tool: editing one operation of a large document rebuilds one tool.
    """
    reusable = {(d.upstream, d.id): (upstream, d) for upstream, d in previous.origins} if previous else {}
    raw = source.raw
    overrides = _mapping(raw.get("tools"))
    hidden = _mapping(raw.get("hidden"))
    offered = {tool.name: tool for tool in expansion.tools}
    problems = _unknown_names(source, offered, overrides, hidden)
    tools: list[ToolDefinition] = []
    origins: list[tuple[UpstreamTool, ToolDefinition]] = []
    by_id: dict[str, str] = {}
    for upstream in _selected(raw, expansion.tools):
        changes = _mapping(overrides.get(upstream.name))
        tool_id = str(changes.get("id") or f"{raw.get('prefix', '')}{upstream.name}")
        problem = _id_problem(source, upstream.name, tool_id, "id" in changes)
        if problem is None and tool_id in by_id:
            problem = source.problem(["tools", upstream.name] if "id" in changes else [source.kind],
                                     f"tools '{by_id[tool_id]}' and '{upstream.name}' both become tool id "
                                     f"'{tool_id}': give one another id (add `tools: {{{upstream.name}: "
                                     f"{{id: ...}}}}`)")
        if problem is not None:
            problems.append(problem if "id" in changes else _passed_over(source, problem))
            continue
        by_id[tool_id] = upstream.name
        hide_problems, hidden_arguments = _hidden(source, upstream, _mapping(hidden.get(upstream.name)))
        problems += hide_problems
        earlier = reusable.get((upstream.name, tool_id))
        if earlier is not None and earlier[0] == upstream and not hide_problems:
            tools.append(earlier[1])  # checked when it was made; the same declaration and upstream tool
            origins.append((upstream, earlier[1]))
            continue
        tool = _definition(source, upstream, tool_id, changes, hidden_arguments)
        tool_problems = checks.check_tool(tool)
        problems += tool_problems if changes else [_passed_over(source, p) for p in tool_problems]
        if not tool_problems and not hide_problems:
            tools.append(tool)
            origins.append((upstream, tool))
    # Tool by tool: one json.dumps of every tool holds the GIL, and so the loop serving calls, until it is done.
    digest = hashlib.sha256(_key(source).encode())
    for t in expansion.tools:
        digest.update(json.dumps([t.name, t.title, t.description, t.summary, t.input_schema, t.binding,
                                  t.output_schema, t.annotations], sort_keys=True, default=str).encode())
    return _Generated(tuple(tools), tuple(problems), digest.hexdigest(), tuple(origins))


def _passed_over(source: SourceDeclaration, problem: Problem) -> Problem:
    """A problem with what a live upstream (an MCP server, an OpenAPI URL) offers, or with what the admin wrote
    that only the upstream's change makes wrong (a hidden parameter it dropped): a warning and the tool is not
    served. As an error it would let the upstream stop every reload of every file."""
    if not _live(source):
        return problem  # a document in the definitions directory is the admin's: its mistakes stop the build
    return replace(problem, severity="warning", message=f"{problem.message}; the tool is not served")


def _live(source: SourceDeclaration) -> bool:
    """Whether what the source offers comes from someone other than the admin, read at build time."""
    return source.kind == "mcp" or "url" in source.settings


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _selected(raw: Mapping[str, Any], tools: Iterable[UpstreamTool]) -> list[UpstreamTool]:
    include = raw.get("include")
    exclude = raw.get("exclude") or ()
    return [tool for tool in tools
            if (include is None or _matches(tool.name, include)) and not _matches(tool.name, exclude)]


def _unknown_names(source: SourceDeclaration, offered: Mapping[str, UpstreamTool], overrides: Mapping[str, Any],
                   hidden: Mapping[str, Any]) -> list[Problem]:
    """A warning for each name (not glob) in include, exclude, tools or hidden that the upstream does not offer:
    a typo there would otherwise do nothing, silently. Not an error: upstreams change under the admin."""
    if not offered:  # nothing read (the upstream is down): every name would be reported
        return []
    problems = []
    for key in ("include", "exclude"):
        for index, name in enumerate(source.raw.get(key) or ()):
            if isinstance(name, str) and not _GLOB.search(name) and name not in offered:
                problems.append(source.problem([key, index], _no_such(name, offered), severity="warning"))
    for key, names in (("tools", overrides), ("hidden", hidden)):
        for name in names:
            if name not in offered:
                problems.append(source.problem([key, name], _no_such(name, offered), key=True, severity="warning"))
    return problems


def _no_such(name: str, offered: Mapping[str, UpstreamTool]) -> str:
    close = difflib.get_close_matches(name, offered, n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else f" ({len(offered)} offered)"
    return f"the upstream offers no tool '{name}'{hint}"


def _id_problem(source: SourceDeclaration, name: str, tool_id: str, overridden: bool) -> Problem | None:
    if TOOL_ID.match(tool_id):
        return None
    if len(tool_id) > MAX_ID and re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_-]*", tool_id):
        why = f"is {len(tool_id)} characters long, more than the {MAX_ID} every LLM provider accepts"
    else:
        why = "is not a valid tool id (a letter, then letters, digits, '_' or '-')"
    fix = suggest_id(tool_id)
    where = ["tools", name, "id"] if overridden else [source.kind]
    return source.problem(where, f"tool '{name}' would get the id '{tool_id}', which {why}: give it one "
                                 f"(add `tools: {{{name}: {{id: {fix}}}}}` to this source){_prefix_hint(source)}",
                          key=not overridden)


def _prefix_hint(source: SourceDeclaration) -> str:
    prefix = source.raw.get("prefix")
    return f", or shorten the prefix '{prefix}'" if prefix else ""


def suggest_id(wanted: str) -> str:
    """A valid id close to ``wanted``: other characters become '_', a leading non-letter gets 't', and a long one
    keeps its start and end around a short digest (so two long ids suggest different ids)."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", wanted).strip("_") or "tool"
    cleaned = cleaned if cleaned[0].isalpha() else f"t_{cleaned}"
    if len(cleaned) <= MAX_ID:
        return cleaned
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:6]
    return f"{cleaned[:40]}_{digest}_{cleaned[-(MAX_ID - 48):]}".replace("__", "_")


def _hidden(source: SourceDeclaration, upstream: UpstreamTool,
            hidden: Mapping[str, Any]) -> tuple[list[Problem], dict[str, Any]]:
    properties = _mapping(upstream.input_schema.get("properties"))
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    for parameter, value in hidden.items():
        where = ["hidden", upstream.name, parameter]
        if parameter not in properties:
            known = ", ".join(properties) or "none"
            problems.append(_passed_over(source, source.problem(
                where, f"tool '{upstream.name}' has no parameter '{parameter}' to hide (parameters: {known})",
                key=True)))
            continue
        if isinstance(value, Mapping) and set(value) == {"context"}:
            if value["context"] not in HIDDEN_CONTEXT:
                problems.append(source.problem([*where, "context"], f"unknown context value {value['context']!r} "
                                                                    f"(one of {', '.join(HIDDEN_CONTEXT)})"))
                continue
        else:
            schema = properties[parameter]
            from jsonschema import Draft202012Validator  # a fixed hidden value: rare, and only at build

            try:
                error = next(Draft202012Validator(dict(schema) if isinstance(schema, Mapping) else schema)
                             .iter_errors(value), None)
            except Exception as exc:  # noqa: BLE001 — the upstream's schema of it is no schema (UnknownType, ...)
                problems.append(_passed_over(source, source.problem(
                    where, f"parameter '{parameter}' of tool '{upstream.name}' has no schema that can check the "
                           f"fixed value: {str(exc).splitlines()[0]}")))
                continue
            if error is not None:
                problems.append(_passed_over(source, source.problem(
                    where, f"the fixed value {value!r} does not match parameter '{parameter}' of tool "
                           f"'{upstream.name}': {error.message}")))
                continue
        values[parameter] = value
    return problems, values


def _definition(source: SourceDeclaration, upstream: UpstreamTool, tool_id: str, changes: Mapping[str, Any],
                hidden_arguments: Mapping[str, Any]) -> ToolDefinition:
    raw = source.raw
    title = upstream.title or upstream.name
    description = upstream.description.strip() or upstream.summary.strip() or title  # blank says nothing
    summary = upstream.summary.strip() or next(iter(description.splitlines()), title)
    scope = changes.get("scope")
    return ToolDefinition(
        id=tool_id,
        name=str(changes.get("name", title)),
        user_description=str(changes.get("user_description", summary)),
        ai_description=str(changes.get("ai_description", description)),
        scope=Scope(scope.lower()) if isinstance(scope, str) else Scope.SERVER,
        binding=upstream.binding,
        input_schema=upstream.input_schema,
        output_schema=upstream.output_schema,
        tags=tuple(changes.get("tags", raw.get("tags", ()))),
        toolsets=tuple(changes.get("toolsets", raw.get("toolsets", ()))),
        timeout_s=changes.get("timeout_s", raw.get("timeout_s")),
        rate_limit=changes.get("rate_limit"),
        annotations={**upstream.annotations, **_mapping(changes.get("annotations"))},
        offer=changes.get("offer"),
        hidden_arguments=hidden_arguments,
        source=source.id,
        upstream=upstream.name,
        document=source.document,
        index=source.index,
        declared_at=source.path,
    )
