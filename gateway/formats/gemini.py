"""Gemini ``FunctionDeclaration``: parameters in Gemini's OpenAPI 3.0 subset.

What changes on the way (see ``google.genai.types.Schema`` for the fields Gemini knows):

- one ``type``, upper-case (``STRING``); ``["string", "null"]`` becomes ``STRING`` + ``nullable: true``, a wider
  union becomes ``anyOf``; a ``{"type": "null"}`` alternative becomes ``nullable``;
- ``enum`` holds strings only; ``const: "x"`` becomes ``enum: ["x"]``; numeric enums are said in the description;
- ``$ref`` is inlined (a recursive one cannot be, and leaves the tool out), ``oneOf`` becomes ``anyOf``, ``allOf``
  is merged; ``additionalProperties`` is dropped (the Gemini Developer API rejects it);
- ``format`` only where Gemini knows it (``date-time``, ``enum``, ``int32``/``int64``, ``float``/``double``);
  other keywords (``exclusiveMinimum``, ``multipleOf``, ``default`` …) go into the description;
- a tool without parameters has no ``parameters`` (Gemini rejects an object without properties there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..catalog.snapshot import Tool
from .adapt import (
    ANY_SCALAR,
    Path,
    check_parameter_names,
    describe,
    implied_types,
    normalise,
    note,
    prepare,
    split_types,
    tool_description,
    unspoken,
    value_types,
)
from .errors import Unadaptable

FORMATS: Mapping[str, frozenset[str]] = {
    "string": frozenset({"date-time", "enum"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
# JSON Schema keyword → Gemini Schema field (camelCase, as on the wire) for what passes unchanged.
KEPT = {
    "title": "title", "minItems": "minItems", "maxItems": "maxItems", "minLength": "minLength",
    "maxLength": "maxLength", "minimum": "minimum", "maximum": "maximum", "pattern": "pattern",
    "minProperties": "minProperties", "maxProperties": "maxProperties",
}
# Gemini's rule for parameter names (FunctionDeclaration.parameters).
PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def render(tool: Tool) -> dict[str, Any]:
    """The tool as a Gemini ``FunctionDeclaration`` dict (``google.genai.types.FunctionDeclaration`` fields)."""
    prepared = prepare(tool.input_schema, keep_cycles=False)
    description, prepared = tool_description(tool, prepared)
    check_parameter_names(prepared, PARAMETER_NAME, "Gemini")
    declaration: dict[str, Any] = {"name": tool.id, "description": description}
    if prepared.get("properties"):
        declaration["parameters"] = gemini_schema(prepared, ())
    return declaration


def gemini_schema(node: Any, path: Path) -> dict[str, Any]:
    """One JSON Schema (``$ref``-free) as a Gemini ``Schema`` dict."""
    node = normalise(node, path)
    types = implied_types(node)
    nullable = "null" in types
    types = [t for t in types if t != "null"]
    if len(types) > 1 and "enum" not in node:
        if "anyOf" in node:
            raise Unadaptable(path, "a type union together with anyOf")
        shared, variants, _ = split_types(node)
        node = {**shared, "anyOf": variants}
        types = []
    if not types and not nullable and "anyOf" not in node and "enum" not in node:
        node["anyOf"] = list(ANY_SCALAR)  # any value: ask for a scalar, the simplest kind

    out: dict[str, Any] = {}
    notes: list[str] = []
    if "enum" in node:
        values = [v for v in node["enum"] if v is not None]
        nullable = nullable or len(values) < len(node["enum"])
        if all(isinstance(v, str) for v in values):
            out["type"], out["enum"] = "STRING", values
            types = ["string"]
        else:
            notes.append(note("one of", values))
            types = [t for t in types or value_types(values) if t != "null"][:1]
    if types and "type" not in out:
        out["type"] = types[0].upper()
    for key, value in node.items():
        if key in ("type", "enum", "description", "properties", "required") or unspoken(key):
            continue
        if key == "additionalProperties" and isinstance(value, bool):
            continue  # Gemini rejects the keyword; a model fills the declared properties anyway
        if key == "items":
            out["items"] = gemini_schema(value, (*path, "items"))
        elif key == "anyOf":
            nullable = _any_of(out, value, path) or nullable
        elif key == "format":
            if value in FORMATS.get(types[0] if types else "", ()):
                out["format"] = value
            else:
                notes.append(note(key, value))
        elif key in KEPT:
            out[KEPT[key]] = value
        elif key == "examples" and isinstance(value, list) and value:
            out["example"] = value[0]
        elif key == "default" and value is None:
            continue
        else:
            notes.append(note(key, value))
    if types == ["object"]:
        out.update(_object(node, path))
    if nullable and "anyOf" in out:
        # OpenAPI 3.0's nullable qualifies a type, so each alternative carries it.
        out["anyOf"] = [{**sub, "nullable": True} for sub in out["anyOf"]]
    elif nullable:
        out["nullable"] = True
    if node.get("description"):
        out["description"] = node["description"]
    return describe(out, notes)


def _any_of(out: dict[str, Any], variants: list[Any], path: Path) -> bool:
    """Fill ``out`` from ``anyOf`` alternatives; True when one of them was null (Gemini says ``nullable``)."""
    converted = [gemini_schema(sub, (*path, "anyOf", i)) for i, sub in enumerate(variants)]
    kept = [sub for sub in converted if set(sub) - {"nullable", "description"}]
    nullable = len(kept) < len(converted) or any(sub.get("nullable") for sub in converted)
    if len(kept) == 1:
        for key, value in kept[0].items():
            out.setdefault(key, value)
    elif kept:
        out["anyOf"] = kept
    return nullable


def _object(node: Mapping[str, Any], path: Path) -> dict[str, Any]:
    properties = dict(node.get("properties") or {})
    required = list(node.get("required") or [])
    for name in required:
        properties.setdefault(name, {})  # required but undeclared: any value
    out: dict[str, Any] = {}
    if properties:
        out["properties"] = {name: gemini_schema(sub, (*path, "properties", name)) for name, sub in properties.items()}
    if required:
        out["required"] = required
    if len(properties) > 1:
        out["propertyOrdering"] = list(properties)  # Gemini otherwise orders properties alphabetically
    return out

