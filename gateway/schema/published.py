"""The published JSON Schemas (``schemas/``) and the validators compiled from them.

The schema files are the single source of truth for the YAML format: the loader validates with exactly what an
editor sees. In a source checkout they are read from ``<repo>/schemas``; a wheel carries them as
``gateway/_schemas``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .fastcheck import lazy_check
from .fastschema import Check, compile_schema
from .jsontypes import TYPES

# jsonschema (with referencing, ~0.1 s to import) is imported where it is used: a catalog whose schemas are plain
# and whose calls are valid never needs it (gateway.schema.fastschema and gateway.schema.fastcheck decide those), so `serve`
# reaches /healthz without it (tests/test_lazy_imports.py).
if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError
    from referencing import Resource

JSON_TYPES = tuple(sorted(TYPES))  # the names a schema's `type` may give, as messages list them
_PACKAGED = Path(__file__).parents[1] / "_schemas"
SCHEMAS_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).parents[2] / "schemas"
DEFINITIONS_SCHEMA = SCHEMAS_DIR / "tool-definitions.schema.json"


def json_type(value: Any) -> str:
    """The JSON Schema type name of a JSON value ("integer" for 3, "number" for 3.5, "array" for a list)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _retrieve(uri: str) -> Resource:
    # Only files inside the schemas directory can be referenced: no network, no arbitrary paths.
    from referencing import Resource
    from referencing.exceptions import NoSuchResource

    if not uri.startswith("file://"):
        raise NoSuchResource(ref=uri)
    path = Path(uri.removeprefix("file://")).resolve()
    if SCHEMAS_DIR.resolve() not in path.parents:
        raise NoSuchResource(ref=uri)
    return Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))


@cache
def definitions_validator() -> Draft202012Validator:
    """Validator of one definitions file, with the per-binding schema parts resolved."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = json.loads(DEFINITIONS_SCHEMA.read_text(encoding="utf-8"))
    base = DEFINITIONS_SCHEMA.resolve().as_uri()
    registry: Registry = Registry(retrieve=_retrieve).with_resource(base, Resource.from_contents(schema))
    return Draft202012Validator({"$ref": base}, registry=registry)


@cache
def definitions_check() -> Check:
    """jsonschema's verdict on a definitions file when it is certain (``gateway.schema.fastschema``), else None."""
    return compile_schema(DEFINITIONS_SCHEMA)


def metaschema_errors(schema: Any) -> list[tuple[list[str | int], str]]:
    """Every way ``schema`` is not a valid JSON Schema, as (path inside the schema, message)."""
    if plainly_valid(schema):
        return []
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator) if isinstance(schema, dict) else Draft202012Validator
    meta = cls(cls.META_SCHEMA)
    found = []
    for error in meta.iter_errors(schema):
        path = list(error.absolute_path)
        if path and path[-1] == "type" and isinstance(error.instance, (str, list)):
            message = f"unknown type {error.instance!r} (types: {', '.join(JSON_TYPES)})"
        else:
            message = best_match([error]).message if error.context else error.message
        found.append((path, message))
    return found


def compile_validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A validator for a tool's input or output schema, with format checking (dates, emails, …) on, made when it
    is first used (``LazyValidator``).

    The empty registry turns off jsonschema's retrieval of remote ``$ref``s: a call must never fetch a URL.
    """
    return LazyValidator(schema)  # type: ignore[return-value]  # it answers every validator attribute


class LazyValidator:
    """A jsonschema validator made on first use: most tools' arguments pass the fast check (``gateway.schema.fastcheck``)
    and many are never called, so making 10,000 validators up front cost load time and ~1 KiB each."""

    __slots__ = ("_check", "_schema", "_validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = schema
        self._validator: Draft202012Validator | None = None
        self._check: Any = None  # the fast check (gateway.schema.fastcheck), made with the first validation

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        """jsonschema's errors, after a fast yes for a value that plainly matches (``gateway.schema.fastcheck``): a valid
        result of a Python tool (``-> float`` is ``{"type": "number"}``) cost ~15 µs of jsonschema per call."""
        check = self._check
        if check is None:
            check = self._check = lazy_check(self._schema)
        if check(instance):
            return iter(())
        return self.__getattr__("iter_errors")(instance)

    def __getattr__(self, name: str) -> Any:  # only for names not in __slots__: the validator's own
        validator = self._validator
        if validator is None:  # two threads may both make one: the same validator, harmless
            from jsonschema import Draft202012Validator
            from jsonschema.validators import validator_for
            from referencing import Registry

            schema = dict(self._schema)  # jsonschema wants a dict, not a read-only view
            cls = validator_for(schema, default=Draft202012Validator)
            validator = self._validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=Registry())
        return getattr(validator, name)


def remote_refs(schema: Any, path: tuple[str | int, ...] = ()) -> list[tuple[list[str | int], str]]:
    """Every ``$ref`` that does not point inside the schema itself, with its path."""
    found = []
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            found.append(([*path, "$ref"], ref))
        for key, value in schema.items():
            found += remote_refs(value, (*path, key))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found += remote_refs(value, (*path, index))
    return found


# The fast path of metaschema_errors. Validating against the 2020-12 metaschema costs ~5 ms a schema in
# jsonschema (its $dynamicRef resolution dominates), which made loading 10,000 tools take tens of seconds.
# `plainly_valid` accepts only schemas built from the common keywords with well-typed values: a strict subset
# of what the metaschema accepts, so it never lets an invalid schema through. Anything else (unknown keywords,
# $ref, odd values) falls back to the full metaschema, which also words the errors.
_SCHEMA = "schema"
_SCHEMA_LIST = "schema list"
_SCHEMA_MAP = "schema map"
_KEYWORDS: dict[str, Any] = {
    "type": "type", "enum": list, "const": "any", "default": "any", "examples": list,
    "title": str, "description": str, "$comment": str, "format": str, "pattern": str,
    "properties": _SCHEMA_MAP, "patternProperties": _SCHEMA_MAP, "$defs": _SCHEMA_MAP,
    "dependentSchemas": _SCHEMA_MAP,
    "additionalProperties": _SCHEMA, "items": _SCHEMA, "contains": _SCHEMA, "not": _SCHEMA,
    "propertyNames": _SCHEMA, "if": _SCHEMA, "then": _SCHEMA, "else": _SCHEMA,
    "unevaluatedProperties": _SCHEMA, "unevaluatedItems": _SCHEMA,
    "prefixItems": _SCHEMA_LIST, "allOf": _SCHEMA_LIST, "anyOf": _SCHEMA_LIST, "oneOf": _SCHEMA_LIST,
    "required": "names", "uniqueItems": bool, "readOnly": bool, "writeOnly": bool, "deprecated": bool,
    "minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
    "multipleOf": "positive",
    "minLength": "count", "maxLength": "count", "minItems": "count", "maxItems": "count",
    "minProperties": "count", "maxProperties": "count", "minContains": "count", "maxContains": "count",
}


def plainly_valid(schema: Any) -> bool:
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for keyword, value in schema.items():
        kind = _KEYWORDS.get(keyword)
        if kind is None or not _value_ok(kind, value):
            return False
    return True


def _value_ok(kind: Any, value: Any) -> bool:
    if kind == "any":
        return True
    if isinstance(kind, type):
        return isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind == _SCHEMA:
        return plainly_valid(value)
    if kind == _SCHEMA_LIST:
        return isinstance(value, list) and bool(value) and all(plainly_valid(v) for v in value)
    if kind == _SCHEMA_MAP:
        return isinstance(value, dict) and all(plainly_valid(v) for v in value.values())
    if kind == "type":
        if isinstance(value, str):
            return value in JSON_TYPES
        return (isinstance(value, list) and bool(value) and len(set(map(str, value))) == len(value)
                and all(isinstance(v, str) and v in JSON_TYPES for v in value))
    if kind == "names":
        return isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "number":
        return is_number
    if kind == "positive":
        return is_number and value > 0
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0  # "count"
