"""``tool-gateway import openapi SPEC``: an OpenAPI document as ordinary YAML tool definitions (http bindings).

The way out of the generated form: the same conversion as an ``openapi:`` source (``gateway.sources.openapi``,
then the framework's include/exclude/prefix), written out as ``tools:`` an admin then edits by hand and serves
like any other file. An operation whose id would not be a valid tool id is written under the suggested id, and
a warning says so (the file is the admin's to rename in).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..definitions.model import SourceDeclaration
from ..definitions.yamlbudget import YamlLimits
from ..errors import Problem
from ..settings import Settings
from .expansion import SourceEnv
from .openapi import expand
from .rules import TOOL_ID, generate, suggest_id

WAIT_S = 30.0
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter: ~20 times faster on big documents


@dataclass(frozen=True)
class Imported:
    text: str  # the YAML definitions file
    problems: tuple[Problem, ...]  # errors stop the import; warnings are printed beside it
    count: int


def import_openapi(spec: str, settings: Settings, *, include: Sequence[str] = (), exclude: Sequence[str] = (),
                   prefix: str = "", security: Mapping[str, str] | None = None,
                   server_url: str | None = None) -> Imported:
    """The tool definitions of the document at ``spec`` (a file path or an http(s) URL)."""
    remote = spec.lower().startswith(("http://", "https://"))
    path = Path(spec)
    openapi: dict[str, Any] = {"url": spec} if remote else {"spec": path.name}
    if security:
        openapi["security"] = dict(security)
    if server_url:
        openapi["server_url"] = server_url
    raw: dict[str, Any] = {"id": "import", "openapi": openapi, "prefix": prefix}
    if include:
        raw["include"] = list(include)
    if exclude:
        raw["exclude"] = list(exclude)
    env = SourceEnv(settings=settings, root=path.parent if not remote else Path("."),
                    limits=YamlLimits.from_settings(settings), wait_s=WAIT_S, deadline=time.monotonic() + WAIT_S)
    expansion = expand(SourceDeclaration("import", "openapi", raw), env)
    problems = [_located(p, spec) for p in expansion.problems]
    renamed = {}
    for tool in expansion.tools:
        wanted = f"{prefix}{tool.name}"
        if not TOOL_ID.match(wanted):
            renamed[tool.name] = {"id": suggest_id(wanted)}
            problems.append(Problem(spec, 1, 1, f"operation '{tool.name}': '{wanted}' is not a valid tool id; "
                                                f"written as '{renamed[tool.name]['id']}'", "warning"))
    declaration = SourceDeclaration("import", "openapi", {**raw, "tools": renamed})
    generated = generate(declaration, expansion)
    problems += [_located(p, spec) for p in generated.problems]
    tools = [_written(tool) for tool in generated.tools]
    header = f"# Imported from {spec} by `tool-gateway import openapi`: ordinary definitions, edit freely.\n"
    text = header + yaml.dump({"tools": tools}, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=120)
    return Imported(text, tuple(problems), len(tools))


def _located(problem: Problem, spec: str) -> Problem:
    """A problem of the in-memory declaration names the document instead (there is no YAML file yet)."""
    if problem.file != "<memory>":
        return problem
    return Problem(spec, 1, 1, problem.message.removeprefix("source 'import': "), problem.severity)


def _written(tool: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": tool.id, "name": tool.name, "user_description": tool.user_description,
                             "ai_description": tool.ai_description, "input_schema": _plain(tool.input_schema),
                             "binding": _plain(tool.binding)}
    if tool.annotations:
        entry["annotations"] = dict(tool.annotations)
    return entry


def _plain(value: Any) -> Any:
    """Mappings and lists as plain dicts and lists, each written once (the dumper would alias shared ones)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
