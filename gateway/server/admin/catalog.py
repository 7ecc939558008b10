"""What the admin console shows of the catalog: the overview, every tool, one tool in full, and the problems of
the last reload with the lines of the file around each.

Everything here reads one catalog snapshot and returns plain JSON values; the routes (``surface.py``) decide who
may ask. A binding is summarised as written in YAML — a URL template, ``module:function``, a script path — never
with a rendered value: templates are not secret, what they render (``{{ secrets.NAME }}``) is.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from ...catalog.snapshot import Catalog, Tool, plugin_of
from ...definitions.paths import real_inside
from ...definitions.yamlsource import YamlDocument
from ...errors import Problem
from ...formats import render_tools
from ...runtime.gateway import Gateway

SHOWN_FORMATS = ("mcp", "openai", "openai-strict", "openai-responses", "anthropic", "gemini")
CONTEXT_LINES = 3  # lines shown before and after a problem's line
MAX_LINE_CHARS = 1_000  # a line shown longer than this is cut (a minified file must not fill the page)
_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def tools_per_plugin(catalog: Catalog) -> dict[str | None, int]:
    """How many tools each plugin serves (None: the definitions directory), counted once per catalog."""
    def count() -> dict[str | None, int]:
        counts: dict[str | None, int] = {}
        for tool in catalog.tools.values():
            plugin = plugin_of(tool, catalog)
            counts[plugin] = counts.get(plugin, 0) + 1
        return counts

    return catalog.memo(("admin", "per-plugin"), count)


def binding_kind(tool: Tool) -> str:
    """``python``, ``http``, ``browser``, or kinds joined by '+' for a tool bound twice (scope all)."""
    return "+".join(tool.definition.binding)


def binding_summary(binding: Mapping[str, Any]) -> str:
    parts = []
    for kind, spec in binding.items():
        if kind == "http" and isinstance(spec, Mapping):
            parts.append(f"{spec.get('method', 'GET')} {spec.get('url', '')}")
        elif kind == "browser" and isinstance(spec, Mapping):
            parts.append(f"script {spec.get('script', '')}")
        else:
            parts.append(str(spec))
    return "; ".join(parts)


def declared(tool: Tool, lines: Callable[[YamlDocument], list[int]] | None = None) -> dict[str, Any]:
    """The file and line where ``tool`` is declared; ``lines`` gives the line of each of a document's tools."""
    definition = tool.definition
    document = definition.document
    if document is None:
        return {"file": definition.file, "line": None}
    try:
        found = lines(document) if lines is not None else []
    except yaml.YAMLError:  # it loaded, so it parses; should it not, the document's own lookup answers
        found = []
    if definition.index < len(found):
        return {"file": definition.file, "line": found[definition.index]}
    line, _ = document.position(["tools", definition.index])
    return {"file": definition.file, "line": line}


def item_lines(text: str, key: str = "tools") -> list[int]:
    """The line of each item of the sequence under the top-level ``key``, read from the C parser's events: a
    tenth of what composing the document costs, and no node tree is kept (the listing needs every tool's line)."""
    lines: list[int] = []
    depth = 0
    in_root = 0  # nodes seen directly in the root mapping: even ones are keys, odd ones values
    wanted = False  # the key just seen is ``key``
    level: int | None = None  # the depth of the wanted sequence's items, once inside it
    for event in yaml.parse(text, Loader=_PARSER):
        if isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            if level is not None and depth < level:
                return lines
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        if depth == 1 and level is None:
            if in_root % 2 == 0:
                wanted = isinstance(event, yaml.ScalarEvent) and event.value == key
            elif wanted and isinstance(event, yaml.SequenceStartEvent):
                level = 2
            in_root += 1
        elif depth == level:
            lines.append(event.start_mark.line + 1)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
    return lines


def tool_entry(tool: Tool, catalog: Catalog, lines: Callable[[YamlDocument], list[int]] | None = None
               ) -> dict[str, Any]:
    definition = tool.definition
    return {"id": tool.id, "name": definition.name, "scope": definition.scope.value, "binding": binding_kind(tool),
            "toolsets": list(definition.toolsets), "tags": list(definition.tags), **declared(tool, lines),
            "plugin": plugin_of(tool, catalog)}


def tools(catalog: Catalog) -> list[dict[str, Any]]:
    """Every tool of the catalog, as the console lists them (computed once per catalog)."""
    def listing() -> list[dict[str, Any]]:
        by_document: dict[int, list[int]] = {}

        def lines(document: YamlDocument) -> list[int]:
            if id(document) not in by_document:
                by_document[id(document)] = item_lines(document.text)
            return by_document[id(document)]

        return [tool_entry(tool, catalog, lines) for tool in catalog.tools.values()]

    return catalog.memo(("admin", "tools"), listing)


def tool_detail(tool: Tool, catalog: Catalog, figures: Mapping[str, Any] | None) -> dict[str, Any]:
    definition = tool.definition
    formats: dict[str, Any] = {}
    diagnostics: dict[str, list[str]] = {}
    for fmt in SHOWN_FORMATS:
        rendered = render_tools([tool], fmt)  # memoised on the tool
        formats[fmt] = rendered.tools[0] if rendered.tools else None
        if rendered.diagnostics:
            diagnostics[fmt] = rendered.diagnostics
    return {
        "id": tool.id, "name": definition.name, "user_description": definition.user_description,
        "ai_description": definition.ai_description, "scope": definition.scope.value,
        "binding": {"kind": binding_kind(tool), "summary": binding_summary(definition.binding)},
        "input_schema": tool.input_schema, "output_schema": tool.output_schema,
        "input_schema_derived": definition.input_schema is None,
        "declared": declared(tool, lambda document: item_lines(document.text)), "plugin": plugin_of(tool, catalog),
        "formats": formats, "format_diagnostics": diagnostics,
        "examples": list(definition.examples), "annotations": dict(definition.annotations),
        "toolsets": list(definition.toolsets), "tags": list(definition.tags), "timeout_s": definition.timeout_s,
        "slo": dict(definition.slo) if definition.slo is not None else None,
        "figures": figures,
    }


def figures_of(gateway: Gateway, tool_id: str) -> Mapping[str, Any] | None:
    """The tool's live figures from the SLO observer (``gateway.observe.slo``), when it runs and knows the tool."""
    figures = getattr(gateway.observers.get("slo"), "figures", None)
    return figures().get(tool_id) if callable(figures) else None


def problems(problems: tuple[Problem, ...], root: str, max_bytes: int) -> list[dict[str, Any]]:
    """``problems`` as the console shows them: each with the lines of its file around it (``excerpt``, None when
    the file is not one of the definitions directory's or cannot be read)."""
    base = os.path.realpath(root)
    return [problem.as_dict() | {"text": str(problem), "excerpt": excerpt(problem, base, max_bytes)}
            for problem in problems]


def excerpt(problem: Problem, base: str, max_bytes: int) -> dict[str, Any] | None:
    """Lines ``line - CONTEXT_LINES`` to ``line + CONTEXT_LINES`` of the problem's file, read no further than
    needed, from a regular file inside the definitions directory of at most ``max_bytes``."""
    if problem.line < 1 or os.path.isabs(problem.file) or ":" in problem.file or problem.file.endswith("/"):
        return None  # the directory itself, a plugin's file (<plugin>:<path>) or a directory: no lines to show
    real = real_inside(os.path.join(base, problem.file), base)
    if real is None:
        return None
    first = max(1, problem.line - CONTEXT_LINES)
    try:
        with open(real, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                return None
            wanted = itertools.islice(file, first - 1, problem.line + CONTEXT_LINES)
            lines = [raw.rstrip(b"\r\n").decode("utf-8", "replace")[:MAX_LINE_CHARS] for raw in wanted]
    except OSError:
        return None
    return {"first_line": first, "lines": lines, "line": problem.line, "column": problem.column}
