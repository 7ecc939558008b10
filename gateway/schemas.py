"""The published JSON Schemas (``schemas/``) and the validators compiled from them.

The schema files are the single source of truth for the YAML format: the loader validates with exactly what an
editor sees. In a source checkout they are read from ``<repo>/schemas``; a wheel carries them as
``gateway/_schemas``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource

JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_PACKAGED = Path(__file__).parent / "_schemas"
SCHEMAS_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).parent.parent / "schemas"
DEFINITIONS_SCHEMA = SCHEMAS_DIR / "tool-definitions.schema.json"


def _retrieve(uri: str) -> Resource:
    # Only files inside the schemas directory can be referenced: no network, no arbitrary paths.
    if not uri.startswith("file://"):
        raise NoSuchResource(ref=uri)
    path = Path(uri.removeprefix("file://")).resolve()
    if SCHEMAS_DIR.resolve() not in path.parents:
        raise NoSuchResource(ref=uri)
    return Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))


@cache
def definitions_validator() -> Draft202012Validator:
    """Validator of one definitions file, with the per-binding schema parts resolved."""
    schema = json.loads(DEFINITIONS_SCHEMA.read_text(encoding="utf-8"))
    base = DEFINITIONS_SCHEMA.resolve().as_uri()
    registry: Registry = Registry(retrieve=_retrieve).with_resource(base, Resource.from_contents(schema))
    return Draft202012Validator({"$ref": base}, registry=registry)


def metaschema_errors(schema: Any) -> list[tuple[list[str | int], str]]:
    """Every way ``schema`` is not a valid JSON Schema, as (path inside the schema, message)."""
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


def compile_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for a tool's input or output schema, with format checking (dates, emails, …) on."""
    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)
