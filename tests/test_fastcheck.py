"""The fast argument check never says yes where jsonschema says no, and says yes for plain valid arguments."""

from __future__ import annotations

import random

import pytest
from jsonschema import Draft202012Validator
from support import EXAMPLES, catalog_for

from gateway.schema.fastcheck import compile_check

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"],
     "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
                                      "mode": {"enum": ["fast", "slow", 1, None]},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 3},
                                               "minItems": 1, "maxItems": 2}}, "required": ["n"]},
    {"type": "object", "properties": {"s": {"type": ["string", "null"], "pattern": "^#[0-9a-f]{2}$", "minLength": 3},
                                      "inner": {"type": "object", "properties": {"x": {"type": "boolean"}},
                                                "additionalProperties": False}}},
]
VALUES = [None, True, False, 0, 1, -1, 1.0, 2.5, 10, 11, "", "a", "abcd", "#0f", "#0F", "#zz", [], ["a"],
          ["a", "b", "c"], ["abcd"], [1], {}, {"x": True}, {"x": 1}, {"y": 1}, "fast", "slow"]


def _instances(schema: dict, rng: random.Random, count: int) -> list[dict]:
    names = [*schema["properties"], "extra"]
    return [{name: rng.choice(VALUES) for name in rng.sample(names, rng.randint(0, len(names)))} for _ in range(count)]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fast_yes_implies_jsonschema_valid(schema):
    """Over thousands of random argument objects, every fast 'valid' is valid for jsonschema too."""
    check = compile_check(schema)
    assert check is not None
    validator = Draft202012Validator(schema)
    rng = random.Random(7)
    accepted = 0
    for instance in _instances(schema, rng, 5000):
        if check(instance):
            accepted += 1
            assert validator.is_valid(instance), instance
    assert accepted > 10  # the fast path is taken, not just always declined


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}},
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
    {"type": "object", "properties": {"o": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
    {"type": "object", "properties": {"e": {"enum": [{"a": 1}]}}},
])
def test_schemas_beyond_the_simple_subset_are_left_to_jsonschema(schema):
    """Formats, references, combinators and structured enums are not compiled: jsonschema decides them."""
    assert compile_check(schema) is None


def test_shipped_tools_mostly_take_the_fast_path():
    """The shipped example tools with flat schemas get a fast check."""
    catalog = catalog_for(EXAMPLES)
    assert catalog.get("sum").fast_check({"a": 1, "b": 2.5})
    assert not catalog.get("sum").fast_check({"a": True, "b": 2})
