"""OpenAI strict mode (Structured Outputs for function calling): the schema transformation and its undoing.

Strict mode accepts a subset of JSON Schema and wants every object closed and fully required:

- every object has ``additionalProperties: false`` and lists all its properties in ``required``; a property that
  was optional is widened to also accept ``null`` (the model sends ``null`` for "not given");
- only ``type``, ``properties``, ``required``, ``additionalProperties``, ``items``, ``anyOf``, ``enum``,
  ``const``, ``$ref``/``$defs`` and ``description`` shape a schema, plus ``pattern``, a few ``format`` values,
  number bounds, ``multipleOf`` and ``minItems``/``maxItems``; anything else (``default``, ``minLength``,
  ``not`` …) is said in the description;
- the root is an object, objects nest at most 10 deep, at most 5000 properties in all, 1000 values per enum.

An object whose keys are not declared (a free-form map) cannot be closed without making it useless, so it makes
the tool ``Unadaptable`` for this format. ``restore_arguments`` undoes the widening on the way back: nulls the
model sent for optional properties that never accepted null are dropped before the original schema checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .adapt import (
    ANY_SCALAR,
    Path,
    accepts_null,
    describe,
    implied_types,
    make_nullable,
    normalise,
    note,
    prepare,
    split_types,
    unspoken,
)
from .errors import Unadaptable

FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
KEPT = frozenset({"pattern", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                  "minItems", "maxItems"})
MAX_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000


def strict_schema(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """``input_schema`` transformed for ``strict: true`` (recursive ``$ref`` kept under ``$defs``)."""
    prepared = prepare(input_schema, keep_cycles=True)
    defs = prepared.pop("$defs", None)
    converter = _Strict()
    root = converter.node(prepared, (), 1, root=True)
    if defs:
        root["$defs"] = {name: converter.node(sub, ("$defs", name), 1) for name, sub in defs.items()}
    return root


class _Strict:
    def __init__(self) -> None:
        self.properties = 0

    def node(self, node: Any, path: Path, depth: int, *, root: bool = False) -> dict[str, Any]:
        if isinstance(node, Mapping) and "$ref" in node:
            return {"$ref": node["$ref"]}  # strict mode takes no keywords beside a $ref
        node = normalise(node, path)
        types = implied_types(node)
        if len([t for t in types if t != "null"]) > 1 and "enum" not in node:
            return self.node(_as_any_of(node, path), path, depth)
        if not types and "anyOf" not in node:
            node["anyOf"] = [*ANY_SCALAR, {"type": "null"}]  # any value: ask for a scalar, the simplest kind

        out: dict[str, Any] = {}
        if types:
            out["type"] = types[0] if len(types) == 1 else types
        notes: list[str] = []
        for key, value in node.items():
            if key in ("type", "description", "title", "properties", "required", "additionalProperties") \
                    or unspoken(key):
                continue
            if key == "items":
                out["items"] = self.node(value, (*path, "items"), depth)
            elif key == "anyOf":
                out["anyOf"] = [self.node(sub, (*path, "anyOf", i), depth) for i, sub in enumerate(value)]
            elif key == "enum":
                if len(value) > MAX_ENUM_VALUES:
                    raise Unadaptable((*path, "enum"), f"more than {MAX_ENUM_VALUES} enum values")
                out["enum"] = list(value)
            elif key == "format" and value not in FORMATS:
                notes.append(note(key, value))
            elif key in KEPT or key == "format":
                out[key] = value
            elif key == "default":
                if value is not None:
                    notes.append(note(key, value))
            else:
                notes.append(note(key, value))
        if "object" in types:
            out.update(self.object(node, path, depth, root))
        description = node.get("description") or node.get("title")
        if description:
            out["description"] = description
        return describe(out, notes)

    def object(self, node: dict[str, Any], path: Path, depth: int, root: bool) -> dict[str, Any]:
        properties = dict(node.get("properties") or {})
        required = list(node.get("required") or [])
        additional = node.get("additionalProperties")
        for name in required:
            properties.setdefault(name, {})  # required but undeclared: any value
        if not properties and additional is not False and not (root and additional is None):
            raise Unadaptable(path, "an object whose keys are not declared (a free-form map) cannot be closed "
                                    "with additionalProperties: false")
        if depth > MAX_DEPTH:
            raise Unadaptable(path, f"objects nested more than {MAX_DEPTH} levels deep")
        self.properties += len(properties)
        if self.properties > MAX_PROPERTIES:
            raise Unadaptable(path, f"more than {MAX_PROPERTIES} properties in all")
        converted = {}
        for name, sub in properties.items():
            strict = self.node(sub, (*path, "properties", name), depth + 1)
            converted[name] = strict if name in required else make_nullable(strict)
        return {"properties": converted, "required": list(converted), "additionalProperties": False}


def _as_any_of(node: Mapping[str, Any], path: Path) -> dict[str, Any]:
    if "anyOf" in node:
        raise Unadaptable(path, "a type union together with anyOf")
    shared, variants, nullable = split_types(node)
    return {**shared, "anyOf": [*variants, *([{"type": "null"}] if nullable else [])]}


def restore_arguments(input_schema: Mapping[str, Any], arguments: Any) -> Any:
    """Arguments from a strict-mode call made fit for the original schema again.

    Drops the ``null`` a model sent for an optional property whose original schema does not accept null (strict
    mode made it say "not given" that way). Everything else passes unchanged, to be validated as usual.
    """
    schema = prepare(input_schema, keep_cycles=True)
    return _restore(schema, arguments, schema.get("$defs") or {})


def _restore(schema: Any, value: Any, defs: Mapping[str, Any]) -> Any:
    if not isinstance(schema, Mapping):
        return value
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if isinstance(value, dict):
        properties, required = _object_view(schema)
        out = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required and not accepts_null(sub):
                continue
            out[key] = _restore(sub, item, defs)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_restore(schema["items"], item, defs) for item in value]
    return value


def _object_view(schema: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Properties an object may have and those it always needs, looking into anyOf/oneOf alternatives."""
    properties = dict(schema.get("properties") or {})
    required = set(schema.get("required") or [])
    for key in ("anyOf", "oneOf"):
        for variant in schema.get(key) or []:
            if isinstance(variant, Mapping):
                for name, sub in (variant.get("properties") or {}).items():
                    properties.setdefault(name, sub)
    return properties, required
