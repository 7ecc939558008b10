"""Anthropic tools: JSON Schema nearly whole, with the root made one object and property keys Claude accepts."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from gateway.formats import render_tool


def test_root_combinators_are_merged_into_one_object_and_described(make_tool, provider_types):
    """Root oneOf/allOf disappear: properties merge, requirements shared by every alternative stay required,
    and the choice between alternatives is said in the tool's description."""
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
              "allOf": [{"properties": {"verbose": {"type": "boolean"}}, "required": ["verbose"]}],
              "oneOf": [{"required": ["id"]}, {"required": ["name"]}]}
    [declaration] = render_tool(make_tool(schema), "anthropic").tools
    input_schema = provider_types.anthropic(declaration)
    assert input_schema == {"type": "object", "required": ["verbose"], "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "verbose": {"type": "boolean"}}}
    assert declaration["description"] == "probe for models.\n\nGive exactly one of: id | name"


def test_object_alternatives_at_the_root_merge_their_properties(make_tool, provider_types):
    """anyOf of two argument shapes becomes one object holding both shapes' properties, none of them required."""
    schema = {"type": "object", "anyOf": [
        {"properties": {"city": {"type": "string"}}, "required": ["city"], "description": "by city"},
        {"properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"]},
    ]}
    [declaration] = render_tool(make_tool(schema), "anthropic").tools
    input_schema = provider_types.anthropic(declaration)
    assert set(input_schema["properties"]) == {"city", "lat", "lon"} and "required" not in input_schema
    assert declaration["description"].endswith("Give at least one of: city (by city) | lat and lon")
    assert Draft202012Validator(input_schema).is_valid({"lat": 1, "lon": 2})


def test_refs_are_inlined_and_identifiers_stripped(make_tool, provider_types):
    """No $schema, $id, $ref or $defs reach Claude when nothing is recursive."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x", "type": "object",
              "$defs": {"Name": {"type": "string", "$comment": "internal"}},
              "properties": {"first": {"$ref": "#/$defs/Name"}, "last": {"$ref": "#/$defs/Name"}}}
    [declaration] = render_tool(make_tool(schema), "anthropic").tools
    assert provider_types.anthropic(declaration) == {
        "type": "object", "properties": {"first": {"type": "string"}, "last": {"type": "string"}}}


def test_recursive_refs_stay_as_refs_to_defs(make_tool, recursive_schema, provider_types):
    """Claude accepts $ref, so a recursive schema keeps its cycle under $defs and still validates trees."""
    [declaration] = render_tool(make_tool(recursive_schema), "anthropic").tools
    input_schema = provider_types.anthropic(declaration)
    assert input_schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    tree = {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}}
    assert Draft202012Validator(input_schema).is_valid(tree)
    assert not Draft202012Validator(input_schema).is_valid({"tree": {"value": 1, "children": [{"value": "x"}]}})


def test_a_property_key_claude_refuses_leaves_the_tool_out(make_tool):
    """Property keys must match [a-zA-Z0-9_.-]{1,64}: a key with a space leaves the tool out, saying why."""
    rendered = render_tool(make_tool({"type": "object", "properties": {"first name": {"type": "string"}}}), "anthropic")
    assert rendered.tools == []
    assert "Anthropic does not accept the parameter name 'first name'" in rendered.diagnostics[0]


def test_the_model_reads_the_ai_description_and_the_root_schema_description(make_tool):
    """The description is ai_description (not user_description), followed by the schema's own description."""
    schema = {"type": "object", "description": "All times are UTC.", "properties": {}}
    [declaration] = render_tool(make_tool(schema), "anthropic").tools
    assert declaration["description"] == "probe for models.\n\nAll times are UTC."
    assert "description" not in declaration["input_schema"]
