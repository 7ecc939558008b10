"""OpenAI strict mode: every property required, optional ones widened to null, objects closed, unsupported
keywords said in descriptions, free-form maps left out, and the widening undone on the way back."""

from __future__ import annotations

from gateway.formats import render_tool, restore_arguments


def _parameters(tool):
    rendered = render_tool(tool, "openai-strict")
    assert rendered.diagnostics == []
    return rendered.tools[0]["function"]["parameters"]


def test_every_property_is_required_and_optional_ones_accept_null(make_tool):
    """Optional properties become required but nullable; required ones keep their type."""
    schema = {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "color": {"enum": ["red", "blue"]},
        "shape": {"anyOf": [{"type": "string"}, {"type": "number"}]},
    }, "required": ["query"]}
    parameters = _parameters(make_tool(schema))
    assert parameters["required"] == ["query", "limit", "color", "shape"]
    assert parameters["additionalProperties"] is False
    properties = parameters["properties"]
    assert properties["query"] == {"type": "string"}
    assert properties["limit"] == {"type": ["integer", "null"]}
    assert properties["color"] == {"type": ["string", "null"], "enum": ["red", "blue", None]}
    assert properties["shape"]["anyOf"][-1] == {"type": "null"}


def test_objects_are_closed_everywhere(make_tool):
    """Nested objects, array items, anyOf alternatives and $defs all get additionalProperties: false."""
    schema = {"type": "object", "properties": {
        "outer": {"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "integer"}}}}},
        "list": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "either": {"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "string"}]},
    }}
    properties = _parameters(make_tool(schema))["properties"]
    inner = properties["outer"]["properties"]["inner"]
    assert inner["additionalProperties"] is False and inner["required"] == ["x"]
    assert properties["list"]["items"]["additionalProperties"] is False
    variants = properties["either"]["anyOf"]
    assert variants[0]["additionalProperties"] is False and variants[0]["required"] == ["a"]
    assert "oneOf" not in properties["either"]


def test_unsupported_keywords_move_into_the_description(make_tool):
    """minLength, default, uniqueItems and unknown formats are said in words; pattern, bounds, known formats stay."""
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "description": "Who.", "minLength": 2, "pattern": "^[A-Z]"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 9, "default": 5},
        "site": {"type": "string", "format": "uri"},
        "mail": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
    }, "required": ["name"]}
    properties = _parameters(make_tool(schema))["properties"]
    assert properties["name"] == {"type": "string", "pattern": "^[A-Z]", "description": "Who. (minLength: 2)"}
    assert properties["limit"]["minimum"] == 1 and properties["limit"]["maximum"] == 9
    assert properties["limit"]["description"] == "default: 5" and "default" not in properties["limit"]
    assert properties["site"]["description"] == "format: uri" and "format" not in properties["site"]
    assert properties["mail"]["format"] == "email"
    assert properties["tags"]["description"] == "uniqueItems: true" and properties["tags"]["maxItems"] == 3


def test_a_free_form_map_leaves_the_tool_out_with_a_located_diagnostic(make_tool, free_form_schema):
    """An object with undeclared keys cannot be closed: the tool is left out, and the diagnostic says where and why."""
    rendered = render_tool(make_tool(free_form_schema, tool_id="tagger"), "openai-strict")
    assert rendered.tools == []
    [diagnostic] = rendered.diagnostics
    assert diagnostic.startswith("probe.yaml:")
    assert "tool 'tagger' left out of the openai-strict format" in diagnostic
    assert "free-form map" in diagnostic and "input_schema.properties.labels" in diagnostic


def test_a_recursive_schema_keeps_its_cycle_under_defs(make_tool, recursive_schema):
    """A recursive $ref stays a reference to a closed definition under $defs (strict mode supports recursion)."""
    parameters = _parameters(make_tool(recursive_schema))
    node = parameters["$defs"]["Node"]
    assert node["additionalProperties"] is False and node["required"] == ["value", "children"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert parameters["properties"]["tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_a_tool_without_parameters_gets_the_empty_closed_object(make_tool):
    """A bare ``type: object`` root becomes the canonical strict no-argument schema."""
    parameters = _parameters(make_tool({"type": "object"}))
    assert parameters == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_objects_nested_too_deep_leave_the_tool_out(make_tool):
    """More than 10 levels of nested objects cannot be offered in strict mode."""
    schema: dict = {"type": "object", "properties": {"leaf": {"type": "string"}}}
    for _ in range(11):
        schema = {"type": "object", "properties": {"down": schema}, "required": ["down"]}
    rendered = render_tool(make_tool(schema), "openai-strict")
    assert rendered.tools == [] and "nested more than 10 levels" in rendered.diagnostics[0]


def test_restore_drops_only_the_nulls_strict_mode_added(make_tool):
    """Nulls for optional properties that never accepted null are dropped; legitimate nulls stay."""
    schema = {"type": "object", "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "note": {"type": ["string", "null"]},
        "filter": {"type": "object", "properties": {"min": {"type": "number"}, "max": {"type": "number"}}},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
    }, "required": ["query"]}
    sent = {"query": "x", "limit": None, "note": None, "filter": {"min": 1, "max": None}, "rows": [{"id": None}]}
    assert restore_arguments(schema, sent) == {"query": "x", "note": None, "filter": {"min": 1}, "rows": [{}]}
    assert restore_arguments(schema, {"query": None}) == {"query": None}  # required: left for validation to reject


def test_alternatives_inside_an_object_become_words(make_tool):
    """An object's oneOf over which properties to give merges into the object; the choice is described."""
    schema = {"type": "object", "properties": {
        "filter": {"type": "object", "description": "What to match.",
                   "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                   "oneOf": [{"required": ["id"]}, {"required": ["name"]}]},
    }, "required": ["filter"]}
    parameters = _parameters(make_tool(schema))
    assert parameters["properties"]["filter"] == {
        "type": "object", "description": "What to match. (Give exactly one of: id | name)",
        "properties": {"id": {"type": ["integer", "null"]}, "name": {"type": ["string", "null"]}},
        "required": ["id", "name"], "additionalProperties": False,
    }
