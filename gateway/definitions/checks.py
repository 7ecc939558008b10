"""Checks of tool definitions that need no imports and no network: each returns every problem it finds.

The YAML format's JSON Schema catches shapes; these functions turn its errors into messages that say what to
change, and add what a schema cannot say (schemas that must themselves be valid, bindings that fit the scope,
ids unique across files). Binding-specific checks (imports, templates, scripts) run when the catalog is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..schema.published import definitions_check, definitions_validator, json_type, metaschema_errors, remote_refs
from ..schema.ref_cycles import ref_cycle
from . import model_text
from .binding_kinds import SERVER_BINDINGS
from .offer_rules import compile_pattern

if TYPE_CHECKING:
    from jsonschema import ValidationError

    from .model import ToolDefinition
    from .yamlsource import YamlDocument


def check_document(document: YamlDocument) -> tuple[list[Problem], set[int]]:
    """Validate a parsed file against ``schemas/tool-definitions.schema.json``.

    Returns the problems and the indices of the tools they are in.
    """
    if not isinstance(document.data, dict):
        got = "an empty file" if document.data is None else json_type(document.data)
        return [document.problem([], f"expected a mapping with a 'tools' list, got {got}")], set()
    if definitions_check()(document.data) is True:  # the common case: certainly valid, without jsonschema
        return [], set()
    problems = []
    misshapen: set[int] = set()
    for error in definitions_validator().iter_errors(document.data):
        problems += _schema_problems(document, error)
        path = list(error.absolute_path)
        if len(path) >= 2 and path[0] == "tools" and isinstance(path[1], int):
            misshapen.add(path[1])
    return problems, misshapen


def _schema_problems(document: YamlDocument, error: ValidationError) -> list[Problem]:
    path = list(error.absolute_path)
    where = _describe(path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = [key for key in error.instance if key not in allowed]
        return [
            document.problem([*path, key], f"unknown key '{key}' in {where} (allowed: {', '.join(allowed)})", key=True)
            for key in extra
        ]
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return [document.problem(path, f"{where} is missing required key '{missing}'")]
    if error.validator == "pattern" and path and path[-1] == "id":
        what = "tool id" if path[0] == "tools" else "source id" if path[0] == "sources" else "id"
        return [
            document.problem(
                path,
                f"invalid {what} {error.instance!r}: use a letter, then letters, digits, '_' or '-', "
                "at most 64 characters (safe for every LLM provider)",
            )
        ]
    if error.validator == "enum":
        options = ", ".join(repr(v) for v in error.validator_value)
        return [document.problem(path, f"{where}: {error.instance!r} is not one of {options}")]
    if error.validator == "type":
        return [document.problem(path, f"{where}: expected {error.validator_value}, got {json_type(error.instance)}")]
    if error.validator == "minProperties" and path and path[-1] == "binding":
        return [document.problem(path, "binding is empty: give one of python, http or browser")]
    if error.validator == "oneOf" and len(path) == 2 and path[0] == "resources":
        return [document.problem(path, f"{where}: give exactly one of text, file or binding")]
    if error.validator in ("minProperties", "maxProperties") and len(path) == 4 and path[2] == "messages":
        return [document.problem(path, f"{where}: give a role and one of text, image or resource")]
    if error.validator == "anyOf" and not path:
        return [document.problem(path, "the file declares nothing: give tools, sources, prompts or resources")]
    if error.validator == "not" and path and path[-1] == "http":
        return [document.problem(path, "http binding: give at most one body (json, form or text)")]
    return [document.problem(path, f"{where}: {error.message}")]


def _describe(path: list[str | int]) -> str:
    if len(path) >= 2 and path[0] == "tools":
        rest = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[2:])
        return f"tools[{path[1]}]{rest}"
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "the file"


def check_tool(tool: ToolDefinition) -> list[Problem]:
    """What the file schema cannot express about one tool."""
    problems: list[Problem] = []
    problems += _check_schema_value(tool, "input_schema")
    problems += _check_schema_value(tool, "output_schema")
    problems += _check_scope(tool)
    when = tool.approval.get("when") if isinstance(tool.approval, dict) else None
    if isinstance(when, dict):  # the arguments are checked against it on every call
        problems += _json_schema_problems(tool, when, ["approval", "when"], "approval.when")
    problems += _check_hidden_text(tool)
    if tool.offer and isinstance(tool.offer.get("when_message_matches"), str):
        try:
            compile_pattern(tool.offer["when_message_matches"])
        except ValueError as exc:
            problems.append(tool.problem(["offer", "when_message_matches"], str(exc)))
    return problems


def _check_schema_value(tool: ToolDefinition, key: str) -> list[Problem]:
    schema = getattr(tool, key)
    if schema is None:
        return []
    problems = _json_schema_problems(tool, schema, [key], key)
    if key == "input_schema" and not problems and schema.get("type") != "object":
        problems.append(
            tool.problem([key], f"input_schema must have 'type: object' at its root (got {schema.get('type')!r})")
        )
    return problems


def _json_schema_problems(tool: ToolDefinition, schema: Any, at: list[str | int], key: str) -> list[Problem]:
    """What makes ``schema`` (at ``at`` in the tool) no JSON Schema a call may check arguments against."""
    problems = [tool.problem([*at, *path], f"{key} is not a valid JSON Schema: {message}")
                for path, message in metaschema_errors(schema)]
    problems += [tool.problem([*at, *path], f"$ref {ref!r} points outside the schema: only local references "
                              "('#/$defs/...') are allowed, a call never fetches a URL")
                 for path, ref in remote_refs(schema)]
    cycle = ref_cycle(schema) if not problems else None
    if cycle is not None:
        path, refs = cycle
        problems.append(tool.problem([*at, *path], f"{key}: $ref cycle {' -> '.join(refs)} (each step applies to "
                                     "the same value, so checking one would never end)"))
    return problems


def _check_hidden_text(tool: ToolDefinition) -> list[Problem]:
    """Hidden characters in what a model reads of the tool (``model_text``): refused at their place. An upstream's
    tool had its own taken out before (``gateway.sources.rules``); what is left here the admin wrote."""
    texts = [(["name"], tool.name), (["user_description"], tool.user_description),
             (["ai_description"], tool.ai_description),
             *((["input_schema", *path], text) for path, text in model_text.texts(tool.input_schema or {})),
             *((["output_schema", *path], text) for path, text in model_text.texts(tool.output_schema or {}))]
    problems = []
    for path, text in texts:
        found = model_text.hidden(text)
        if found:
            problems.append(tool.problem(path, f"{'.'.join(map(str, path))} holds {len(found)} hidden character(s) "
                                               f"(first: {found[0][1]} at character {found[0][0]}): text a model "
                                               "reads must show what it says; remove them"))
    return problems


def _check_scope(tool: ToolDefinition) -> list[Problem]:
    binding = tool.binding
    servers = [kind for kind in SERVER_BINDINGS if kind in binding]
    problems = []
    if len(servers) > 1:
        problems.append(tool.problem(["binding"], "give one server binding, not both python and http"))
    if tool.scope.value == "server" and "browser" in binding:
        problems.append(
            tool.problem(["binding", "browser"], "a browser script needs scope 'client' or 'all' (scope is 'server')", key=True)
        )
    if tool.scope.value == "client" and servers:
        problems.append(
            tool.problem(["binding", servers[0]], "scope 'client' runs only in the browser: remove the server binding, "
                         "or use scope 'all'", key=True)
        )
    if tool.scope.runs_in_browser and "browser" not in binding:
        problems.append(tool.problem(["binding"], f"scope '{tool.scope.value}' needs a browser script (binding.browser)"))
    if tool.scope.runs_on_server and not servers:
        problems.append(
            tool.problem(["binding"], f"scope '{tool.scope.value}' needs a server binding (binding.python or binding.http)")
        )
    return problems


def duplicate_ids(tools: Iterable[ToolDefinition]) -> list[Problem]:
    """One problem per repeated id, at the repeat, naming the first declaration."""
    first: dict[str, ToolDefinition] = {}
    problems = []
    for tool in tools:
        earlier = first.setdefault(tool.id, tool)
        if earlier is not tool:
            line, column = earlier.document.position(["tools", earlier.index, "id"]) if earlier.document else (1, 1)
            problems.append(
                tool.problem(["id"], f"duplicate tool id '{tool.id}' (first declared at {earlier.file}:{line}:{column})")
            )
    return problems
