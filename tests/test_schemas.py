"""The fast path of the metaschema check never accepts what the full JSON Schema metaschema rejects."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from gateway.schema.published import metaschema_errors, plainly_valid

VALID = [
    {"type": "object", "properties": {"a": {"type": ["string", "null"], "maxLength": 3}}, "required": ["a"]},
    {"type": "array", "items": {"enum": [1, "x", None]}, "minItems": 0, "uniqueItems": True},
    {"anyOf": [{"type": "integer", "multipleOf": 2}, {"const": {"k": 1}}], "description": "d", "default": 4},
    {"type": "object", "additionalProperties": False, "patternProperties": {"^x": True}},
]
INVALID = [
    {"type": "strnig"},
    {"type": ["string", "string"]},
    {"type": []},
    {"properties": {"a": {"type": 1}}},
    {"required": "a"},
    {"required": ["a", "a"]},
    {"minLength": -1},
    {"minLength": 1.5},
    {"multipleOf": 0},
    {"anyOf": []},
    {"items": {"minItems": True}},
    {"enum": "abc"},
    {"uniqueItems": "yes"},
]


@pytest.mark.parametrize("schema", VALID)
def test_common_valid_schemas_take_the_fast_path(schema):
    """Schemas made of common keywords are accepted without the slow metaschema walk, and are truly valid."""
    assert plainly_valid(schema)
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("schema", INVALID)
def test_invalid_schemas_never_pass_the_fast_path(schema):
    """Invalid schemas are not plainly valid, so the full metaschema reports them."""
    assert not plainly_valid(schema)
    assert metaschema_errors(schema)
