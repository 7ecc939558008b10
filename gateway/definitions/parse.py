"""One definitions file's tools, sources, overrides, prompts and resources, parsed and checked on its own.

This is the first half of loading (``gateway.definitions.load`` walks a directory and checks the files against
each other): what a file holds depends on its bytes alone, so a parse is cached by content hash, and a file that
parsed and checked without a problem is kept as rows (``_row``) that make its tools again without the YAML.

A file may declare ``sources:`` besides ``tools:`` (``SourceDeclaration``): they are read here as written and
expanded into tools when the catalog is built (``gateway.sources.select``); and ``prompts:`` and ``resources:``
(``gateway.definitions.prompts_resources``), built with the catalog too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Problem
from ..schema.published import definitions_validator
from ..settings import Settings
from . import checks
from .binding_kinds import SERVER_BINDINGS
from .model import Scope, SourceDeclaration, ToolDefinition
from .prompts_resources import KEYS, Declared, declared
from .yamlbudget import YamlLimits
from .yamlsource import ParsedStore, YamlDocument, keep_document, kept_document, parse_yaml

DEFAULT_LIMITS = YamlLimits.from_settings(Settings())
# The keys of a `sources:` entry besides its kind's (`openapi:`, `mcp:`), which the schema requires one of.
SOURCE_KEYS = frozenset({"id", "include", "exclude", "prefix", "tools", "hidden", "toolsets", "tags", "timeout_s",
                         "on_change"})
_SCOPES = {scope.value: scope for scope in Scope}
# Top-level keys besides `tools:` whose entries are read from the document itself, not from kept rows.
_DECLARED_BESIDE = frozenset({"sources", "overrides", "prompts", "resources"})


@dataclass(frozen=True, eq=False)
class Override:
    """``overrides: [{tool: id, ...}]``: an admin's change to a tool declared elsewhere (a plugin's)."""

    tool: str
    changes: Mapping[str, Any]  # the keys given besides `tool`: enabled, descriptions, scope, toolsets, ...
    document: YamlDocument
    index: int

    def problem(self, key: str, message: str) -> Problem:
        return self.document.problem(["overrides", self.index, key], message)


@dataclass(frozen=True, eq=False)
class FileDefinitions:
    file: str
    digest: str
    tools: tuple[ToolDefinition, ...]  # every tool with an id, for cross-file checks
    problems: tuple[Problem, ...]
    broken: frozenset[int] = frozenset()  # indices of tools with problems: not built, not served
    overrides: tuple[Override, ...] = ()
    sources: tuple[SourceDeclaration, ...] = ()  # the well-formed entries of `sources:`
    api_document: bool = False  # an OpenAPI document (read by a source), not a definitions file
    prompts: tuple[Declared, ...] = ()  # the well-formed entries of `prompts:`
    resources: tuple[Declared, ...] = ()  # and of `resources:`

    @property
    def buildable(self) -> tuple[ToolDefinition, ...]:
        if not self.broken:  # the common case, asked for every file on every reload
            return self.tools
        return tuple(tool for tool in self.tools if tool.index not in self.broken)


def parse_definitions(file: str, text: str, limits: YamlLimits = DEFAULT_LIMITS,
                      store: ParsedStore | None = None, digest: str | None = None) -> FileDefinitions:
    """Parse and check one definitions file on its own.

    A file that parsed and checked without a problem is kept in ``store`` (``gateway.catalog.disk_cache``): the same
    text under the same limits (and gateway code) is then neither parsed nor checked again.
    """
    digest = digest or hashlib.sha256(text.encode()).hexdigest()  # a loaded file's is known: of the same bytes
    kept = kept_document(file, text, digest, limits, store) if store is not None else None
    trusted = kept is not None
    problems: list[Problem] = []
    if kept is not None:
        document, rows = kept
        if isinstance(document.data, dict) and rows is not None \
                and not _DECLARED_BESIDE.intersection(document.data):  # the common file: tools made from rows
            return FileDefinitions(file, digest, tuple(_from_row(row, document) for row in rows), ())
    else:
        document, problems = parse_yaml(file, text, limits)
    if document is None:
        return FileDefinitions(file, digest, (), tuple(problems))
    shape_problems, misshapen = ([], set()) if trusted else checks.check_document(document)
    problems += shape_problems
    tools: list[ToolDefinition] = []
    broken: set[int] = set(misshapen)
    raw_tools = document.data.get("tools") if isinstance(document.data, dict) else None
    for index, raw in enumerate(raw_tools if isinstance(raw_tools, list) else []):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("binding"), dict):
            continue  # already reported by the schema check; nothing usable to build
        tool = _definition(raw, document, index)
        if index not in misshapen and not trusted:  # a misshapen tool's semantic checks would only add noise
            tool_problems = checks.check_tool(tool)
            problems += tool_problems
            broken.update([index] if tool_problems else [])
        tools.append(tool)
    raw_overrides = document.data.get("overrides") if isinstance(document.data, dict) else None
    overrides = tuple(
        Override(raw["tool"], {k: v for k, v in raw.items() if k != "tool"}, document, index)
        for index, raw in enumerate(raw_overrides if isinstance(raw_overrides, list) else [])
        if isinstance(raw, dict) and isinstance(raw.get("tool"), str)  # else the schema check reported it
    )
    sources = _sources(document, problems)
    prompts, resources = (declared(document, section, _misshapen(document, section)) for section in KEYS)
    if store is not None and not trusted and not problems:
        keep_document(document, digest, limits, store, tuple(_row(tool) for tool in tools))
    problems.sort(key=lambda p: (p.line, p.column))
    return FileDefinitions(file, digest, tuple(tools), tuple(problems), frozenset(broken), overrides, sources,
                           prompts=prompts, resources=resources)


def _misshapen(document: YamlDocument, section: str) -> set[int]:
    """The indices of the entries of ``section`` the schema check reported a problem in."""
    raw = document.data.get(section) if isinstance(document.data, dict) else None
    if not isinstance(raw, list):
        return set()
    return {error.absolute_path[1] for error in definitions_validator().iter_errors({section: raw})
            if len(error.absolute_path) >= 2}


def _sources(document: YamlDocument, problems: list[Problem]) -> tuple[SourceDeclaration, ...]:
    """The entries of `sources:` the schema check let through whole (it reported the others)."""
    raw_sources = document.data.get("sources") if isinstance(document.data, dict) else None
    if not isinstance(raw_sources, list):
        return ()
    # The schema check reported what is wrong in an entry; such an entry is not expanded (its kind would read it).
    misshapen = _misshapen(document, "sources")
    found: dict[str, SourceDeclaration] = {}
    for index, raw in enumerate(raw_sources):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or index in misshapen:
            continue
        kinds = [key for key in raw if key not in SOURCE_KEYS]  # the schema allows only the kinds' keys besides
        if len(kinds) != 1:
            got = " and ".join(kinds) if kinds else "none"
            problems.append(document.problem(["sources", index], f"source '{raw['id']}': give exactly one kind "
                                                                 f"(openapi or mcp), got {got}"))
            continue
        if not isinstance(raw[kinds[0]], dict):
            continue  # the schema's problem
        source = SourceDeclaration(raw["id"], kinds[0], raw, document, index)
        earlier = found.setdefault(source.id, source)
        if earlier is not source:
            problems.append(repeated_source(source, earlier))
    return tuple(found.values())


def repeated_source(source: SourceDeclaration, earlier: SourceDeclaration) -> Problem:
    """The problem at ``source``, whose id ``earlier`` declared first (in this file or another)."""
    line, column = earlier.document.position([*earlier.path, "id"]) if earlier.document else (1, 1)
    return source.problem(["id"], f"duplicate source id (first declared at {earlier.file}:{line}:{column})")


def _definition(raw: dict[str, Any], document: YamlDocument, index: int) -> ToolDefinition:
    binding = raw["binding"]
    scope = raw.get("scope")
    if isinstance(scope, str) and scope.lower() in _SCOPES:
        resolved = _SCOPES[scope.lower()]
    elif "browser" in binding:
        resolved = Scope.ALL if any(kind in binding for kind in SERVER_BINDINGS) else Scope.CLIENT
    else:
        resolved = Scope.SERVER
    return ToolDefinition(
        id=raw["id"],
        name=str(raw.get("name", "")),
        user_description=str(raw.get("user_description", "")),
        ai_description=str(raw.get("ai_description", "")),
        scope=resolved,
        binding=binding,
        input_schema=raw.get("input_schema"),
        output_schema=raw.get("output_schema"),
        tags=_labels(raw.get("tags")),
        toolsets=_labels(raw.get("toolsets")),
        timeout_s=raw.get("timeout_s"),
        rate_limit=raw["rate_limit"] if isinstance(raw.get("rate_limit"), dict) else None,
        annotations=raw.get("annotations") or {},
        return_direct=bool(raw.get("return_direct", False)),
        max_calls=raw.get("max_calls"),
        offer=raw.get("offer"),
        return_schema=raw.get("return_schema"),
        filters=tuple(raw["filters"]) if isinstance(raw.get("filters"), list) else (),
        audit_arguments=_mapping(raw.get("audit")).get("arguments", True) is not False,
        slo=raw["slo"] if isinstance(raw.get("slo"), dict) else None,
        examples=tuple(e for e in raw["examples"] if isinstance(e, dict)) if isinstance(raw.get("examples"), list)
        else (),
        approval=raw.get("approval"),
        document=document,
        index=index,
    )


# A definition kept on disk (gateway.catalog.disk_cache) is the tuple of what ``_definition`` made of its YAML, in the
# field order of ToolDefinition up to ``approval`` (its scope by value), after its index: made again positionally,
# it costs half of ``_definition`` (10,000 tools: ~40 ms of a warm start). Fields after ``approval`` are a YAML
# tool's defaults. tests/test_warm_restart.py proves the two ways give equal definitions.
_ROW_FIELDS = ("id", "name", "user_description", "ai_description", "scope", "binding", "input_schema",
               "output_schema", "tags", "toolsets", "timeout_s", "rate_limit", "annotations", "return_direct",
               "max_calls", "offer", "return_schema", "filters", "audit_arguments", "slo", "examples", "approval")


def _row(tool: ToolDefinition) -> tuple[Any, ...]:
    return (tool.index, *(getattr(tool, name) for name in _ROW_FIELDS[:4]), tool.scope.value,
            *(getattr(tool, name) for name in _ROW_FIELDS[5:]))


def _from_row(row: tuple[Any, ...], document: YamlDocument) -> ToolDefinition:
    return ToolDefinition(row[1], row[2], row[3], row[4], _SCOPES[row[5]], *row[6:], {}, None, None, document,
                          row[0])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _labels(value: Any) -> tuple[str, ...]:
    # A misshapen tool is still made (its id takes part in the cross-file checks) before the schema check's problem
    # is reported: `tags: 5` must not crash here, and `tags: "abc"` must not become its letters.
    return tuple(value) if isinstance(value, list) else ()

