"""The rules every source kind shares: what an upstream offers (its ``Expansion``) becomes tool definitions.

``gateway.sources.select`` expands each source by its kind, then ``generate`` applies these steps, the same for
every kind:

    select     ``include`` then ``exclude`` (names or ``fnmatch`` globs, matched against the upstream's names)
    name       id = ``tools.<name>.id``, else ``prefix`` + name; an id that is not a valid tool id (a letter, then
               letters, digits, ``_`` or ``-``; 64 characters at most) is a problem that suggests a fix: never
               truncated, never renamed behind the admin's back
    override   ``tools.<name>``: name, descriptions, toolsets, tags, scope, annotations, timeout_s, offer, approval
    defaults   ``toolsets``, ``tags``, ``timeout_s`` of the source for every tool that does not set its own
    hide       ``hidden.<name>.<parameter>``: a fixed value, or ``{context: user|conversation_id|...}``; the
               parameter must be in the operation's input schema (and a fixed value must match it). The catalog
               removes it from what the LLM sees and merges it into the arguments at call time
               (``gateway.catalog.hidden_arguments``), for every kind

``tool-gateway import openapi`` (``gateway.sources.openapi_import``) writes out the same generation as YAML.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..definitions import checks, model_text
from ..definitions.model import Scope, SourceDeclaration, ToolDefinition
from ..errors import Problem
from .expansion import Expansion, UpstreamTool

TOOL_ID = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")
MAX_ID = 64
# What a hidden argument may be filled from: fields of the call's context (gateway.context.CallContext).
HIDDEN_CONTEXT = ("user", "conversation_id", "tool_call_id", "caller", "surface")
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True, eq=False)
class Generated:
    """One source's definitions, the problems met making them, and a digest of what they were made from."""

    tools: tuple[ToolDefinition, ...]
    problems: tuple[Problem, ...]
    digest: str
    origins: tuple[tuple[UpstreamTool, ToolDefinition], ...] = ()  # each definition and what it was made from


def declaration_key(source: SourceDeclaration) -> str:
    """The declaration as written, in its file: what its generated definitions' digest and its last expansion
    (``gateway.sources.select``) are known by."""
    return json.dumps([source.file, source.raw], sort_keys=True, default=str)


def generate(source: SourceDeclaration, expansion: Expansion, previous: Generated | None = None) -> Generated:
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
        read, warnings = _readable(source, upstream)  # every build: a reused tool's warnings are said again
        problems += warnings
        earlier = reusable.get((upstream.name, tool_id))
        if earlier is not None and earlier[0] == upstream and not hide_problems:
            tools.append(earlier[1])  # checked when it was made; the same declaration and upstream tool
            origins.append((upstream, earlier[1]))
            continue
        tool = _definition(source, read, tool_id, changes, hidden_arguments)
        tool_problems = checks.check_tool(tool)
        problems += tool_problems if changes else [_passed_over(source, p) for p in tool_problems]
        if not tool_problems and not hide_problems:
            tools.append(tool)
            origins.append((upstream, tool))
    # Tool by tool: one json.dumps of every tool holds the GIL, and so the loop serving calls, until it is done.
    digest = hashlib.sha256(declaration_key(source).encode())
    for t in expansion.tools:
        digest.update(json.dumps([t.name, t.title, t.description, t.summary, t.input_schema, t.binding,
                                  t.output_schema, t.annotations], sort_keys=True, default=str).encode())
    return Generated(tuple(tools), tuple(problems), digest.hexdigest(), tuple(origins))


def _readable(source: SourceDeclaration, upstream: UpstreamTool) -> tuple[UpstreamTool, list[Problem]]:
    """``upstream`` with the hidden characters taken out of what a model reads of it, and a warning for each text
    that held some or that reads like instructions to the model (``gateway.definitions.model_text``)."""
    warnings = []
    texts = {"title": upstream.title, "description": upstream.description, "summary": upstream.summary,
             **{f"input_schema.{'.'.join(map(str, path))}": text for path, text in model_text.texts(upstream.input_schema)},
             **{f"output_schema.{'.'.join(map(str, path))}": text
                for path, text in model_text.texts(upstream.output_schema or {})}}
    held = False
    for where, text in texts.items():
        found = model_text.hidden(text)
        held = held or bool(found)
        if found:
            warnings.append(source.problem([source.kind], f"tool '{upstream.name}': its {where} held {len(found)} "
                                           f"hidden character(s) (first: {found[0][1]} at character {found[0][0]}), "
                                           "taken out: they can carry instructions a reader never sees",
                                           severity="warning"))
        for rule in model_text.suspicious(text):
            warnings.append(source.problem([source.kind], f"tool '{upstream.name}': its {where} reads like "
                                           f"instructions to the model (rule {rule}): read it before you trust it",
                                           severity="warning"))
    if not held:
        return upstream, warnings
    output = model_text.without_hidden(upstream.output_schema) if upstream.output_schema is not None else None
    return replace(upstream, title=model_text.strip_hidden(upstream.title),
                   description=model_text.strip_hidden(upstream.description),
                   summary=model_text.strip_hidden(upstream.summary),
                   input_schema=model_text.without_hidden(upstream.input_schema), output_schema=output), warnings


def _passed_over(source: SourceDeclaration, problem: Problem) -> Problem:
    """A problem with what a live upstream (an MCP server, an OpenAPI URL) offers, or with what the admin wrote
    that only the upstream's change makes wrong (a hidden parameter it dropped): a warning and the tool is not
    served. As an error it would let the upstream stop every reload of every file."""
    if not is_live(source):
        return problem  # a document in the definitions directory is the admin's: its mistakes stop the build
    return replace(problem, severity="warning", message=f"{problem.message}; the tool is not served")


def is_live(source: SourceDeclaration) -> bool:
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
        approval=changes.get("approval"),
        hidden_arguments=hidden_arguments,
        source=source.id,
        upstream=upstream.name,
        document=source.document,
        index=source.index,
        declared_at=source.path,
    )
