"""The shared adaptation steps: $ref inlining with cycle detection, allOf merging, arrays given items."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from gateway.formats.adapt import merge_all_of, prepare
from gateway.formats.errors import Unadaptable
from gateway.formats.refs import inline_refs


def test_inlining_copies_targets_and_lets_the_reference_keywords_win():
    """Every local pointer form resolves; a $ref's sibling description overrides the target's."""
    schema = {
        "type": "object",
        "$defs": {"Name": {"type": "string", "description": "A name."}},
        "definitions": {"Age": {"type": "integer", "minimum": 0}},
        "properties": {
            "first": {"$ref": "#/$defs/Name", "description": "Given name."},
            "age": {"$ref": "#/definitions/Age"},
            "alias": {"$ref": "#/properties/first"},
            "odd~key": {"type": "boolean"},
            "flag": {"$ref": "#/properties/odd~0key"},
        },
    }
    inlined = inline_refs(schema, keep_cycles=False)
    properties = inlined["properties"]
    assert properties["first"] == {"type": "string", "description": "Given name."}
    assert properties["age"] == {"type": "integer", "minimum": 0}
    assert properties["alias"] == {"type": "string", "description": "Given name."}
    assert properties["flag"] == {"type": "boolean"}
    assert "$defs" not in inlined and "definitions" not in inlined


def test_data_keywords_are_never_searched_for_references():
    """An enum or default value that looks like a $ref is data and stays as written."""
    schema = {"type": "object", "properties": {"x": {"enum": [{"$ref": "#/nowhere"}], "default": {"$ref": "#"}}}}
    assert inline_refs(schema, keep_cycles=False) == schema


def test_a_cycle_through_two_definitions_is_detected():
    """A → B → A is recursive: fatal without keep_cycles (with the path), kept under $defs with it."""
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "n": {"type": "integer"}}},
    }}
    with pytest.raises(Unadaptable) as caught:
        inline_refs(schema, keep_cycles=False)
    assert caught.value.reason == "recursive $ref '#/$defs/A'"
    assert caught.value.path == ("$defs", "B", "properties", "a", "$ref")
    kept = inline_refs(schema, keep_cycles=True)
    assert set(kept["$defs"]) == {"A"}
    validator = Draft202012Validator(kept)
    assert validator.is_valid({"a": {"b": {"a": {"b": {"n": 1}}}}})
    assert not validator.is_valid({"a": {"b": {"a": {"b": {"n": "one"}}}}})


def test_recursion_through_the_root_is_kept_as_a_definition():
    """``$ref: "#"`` (the whole schema) becomes a definition named root."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "parent": {"$ref": "#"}}}
    kept = inline_refs(schema, keep_cycles=True)
    assert kept["properties"]["parent"] == {"$ref": "#/$defs/root"}
    assert kept["$defs"]["root"]["properties"]["parent"] == {"$ref": "#/$defs/root"}
    assert Draft202012Validator(kept).is_valid({"name": "a", "parent": {"name": "b", "parent": {"name": "c"}}})


@pytest.mark.parametrize(("ref", "reason"), [
    ("https://example.com/schema.json", "points outside the schema"),
    ("#anchor", "names an anchor"),
    ("#/$defs/Missing", "does not resolve"),
])
def test_references_that_cannot_be_inlined_say_why(ref, reason):
    """External, anchor and dangling references are Unadaptable with a reason naming the reference."""
    with pytest.raises(Unadaptable, match=reason) as caught:
        inline_refs({"type": "object", "properties": {"x": {"$ref": ref}}}, keep_cycles=True)
    assert caught.value.path == ("properties", "x", "$ref")


def test_a_schema_that_explodes_when_inlined_is_refused():
    """Definitions that each use the previous one twice would grow exponentially: refused, not expanded."""
    defs = {"D0": {"type": "string"}}
    for i in range(1, 30):
        defs[f"D{i}"] = {"type": "object", "properties": {"l": {"$ref": f"#/$defs/D{i-1}"},
                                                           "r": {"$ref": f"#/$defs/D{i-1}"}}}
    with pytest.raises(Unadaptable, match="nodes once its \\$refs are inlined"):
        inline_refs({"type": "object", "properties": {"x": {"$ref": "#/$defs/D29"}}, "$defs": defs}, keep_cycles=True)


def test_all_of_parts_merge_into_one_schema():
    """Properties and required lists join, integer ∩ number is integer, bounds tighten."""
    merged = merge_all_of([
        {"type": "number", "minimum": 0, "maximum": 10, "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"type": "integer", "minimum": 2, "maximum": 20, "properties": {"b": {"type": "string"}}, "required": ["b"]},
    ], ())
    assert merged == {"type": "integer", "minimum": 2, "maximum": 10, "required": ["a", "b"],
                      "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}


def test_all_of_parts_that_disagree_on_the_type_are_unadaptable():
    """A string that must also be an integer accepts nothing: say so rather than guess."""
    with pytest.raises(Unadaptable, match="disagree on the type"):
        merge_all_of([{"type": "string"}, {"type": "integer"}], ("properties", "x"))


def test_prepare_gives_nested_arrays_items_and_a_plain_object_root():
    """Arrays inside combinators and definitions get items; the root is type object without combinators."""
    schema = {"oneOf": [{"properties": {"a": {"type": "array"}}, "required": ["a"]},
                        {"properties": {"b": {"anyOf": [{"type": "array"}, {"type": "null"}]}}}]}
    prepared = prepare(schema, keep_cycles=False)
    assert prepared["type"] == "object" and "oneOf" not in prepared
    assert prepared["properties"]["a"] == {"type": "array", "items": {}}
    assert prepared["properties"]["b"]["anyOf"][0] == {"type": "array", "items": {}}


def test_a_tagged_union_keeps_every_tag_value():
    """Variants narrowing a declared property (kind: const circle | const square) leave it accepting both values."""
    schema = {"type": "object", "required": ["kind"],
              "properties": {"kind": {"type": "string", "enum": ["circle", "square"]}, "r": {"type": "number"},
                             "side": {"type": "number"}},
              "oneOf": [{"properties": {"kind": {"const": "circle"}}, "required": ["r"]},
                        {"properties": {"kind": {"const": "square"}}, "required": ["side"]}]}
    prepared = prepare(schema, keep_cycles=True)
    validator = Draft202012Validator(prepared)
    assert validator.is_valid({"kind": "circle", "r": 1}) and validator.is_valid({"kind": "square", "side": 2})
