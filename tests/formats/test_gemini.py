"""Gemini FunctionDeclaration: the OpenAPI 3.0 subset — nullable instead of type arrays, string enums, $ref
inlined (recursion leaves the tool out), no additionalProperties, unknown keywords said in descriptions."""

from __future__ import annotations

from gateway.formats import render_tool, render_tools


def _parameters(tool, provider_types):
    rendered = render_tool(tool, "gemini")
    assert rendered.diagnostics == []
    provider_types.gemini(rendered.tools[0])
    return rendered.tools[0]["parameters"]


def test_type_arrays_and_null_alternatives_become_nullable(make_tool, provider_types):
    """``[string, null]``, ``anyOf [X, null]`` and ``oneOf [integer, null]`` become one type with nullable."""
    schema = {"type": "object", "properties": {
        "note": {"type": ["string", "null"]},
        "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
        "count": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
    }}
    properties = _parameters(make_tool(schema), provider_types)["properties"]
    assert properties["note"] == {"type": "STRING", "nullable": True}
    assert properties["when"] == {"type": "STRING", "format": "date-time", "nullable": True}
    assert properties["count"] == {"type": "INTEGER", "nullable": True}


def test_a_type_union_becomes_any_of_with_each_type_keeping_its_keywords(make_tool, provider_types):
    """``[integer, string, null]`` splits into alternatives, each with its own bounds or pattern, each nullable."""
    schema = {"type": "object", "properties": {
        "amount": {"type": ["integer", "string", "null"], "minimum": 0, "pattern": "^[0-9]+$", "description": "How much."},
    }}
    amount = _parameters(make_tool(schema), provider_types)["properties"]["amount"]
    assert amount == {"anyOf": [
        {"type": "INTEGER", "minimum": 0, "nullable": True},
        {"type": "STRING", "pattern": "^[0-9]+$", "nullable": True},
    ], "description": "How much."}


def test_const_and_enums_become_string_enums_or_words(make_tool, provider_types):
    """A string const is a one-value enum; numeric enums and consts, which Gemini cannot hold, are described."""
    schema = {"type": "object", "properties": {
        "kind": {"const": "circle"},
        "level": {"type": "integer", "enum": [1, 2, 3], "description": "Level."},
        "version": {"const": 2},
        "mode": {"enum": ["fast", "slow", None]},
    }}
    properties = _parameters(make_tool(schema), provider_types)["properties"]
    assert properties["kind"] == {"type": "STRING", "enum": ["circle"]}
    assert properties["level"] == {"type": "INTEGER", "description": "Level. (one of: [1, 2, 3])"}
    assert properties["version"] == {"type": "INTEGER", "description": "one of: [2]"}
    assert properties["mode"] == {"type": "STRING", "enum": ["fast", "slow"], "nullable": True}


def test_refs_are_inlined_and_additional_properties_dropped(make_tool, provider_types):
    """$ref targets are copied in (the reference's description wins); additionalProperties never appears."""
    point = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": False}
    schema = {"type": "object", "$defs": {"Point": point}, "additionalProperties": False, "properties": {
        "start": {"$ref": "#/$defs/Point", "description": "Start."},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    }}
    properties = _parameters(make_tool(schema), provider_types)["properties"]
    assert properties["start"] == {"type": "OBJECT", "properties": {"x": {"type": "NUMBER"}}, "required": ["x"],
                                   "description": "Start."}
    assert properties["labels"] == {"type": "OBJECT", "description": 'additionalProperties: {"type": "string"}'}


def test_unsupported_formats_and_keywords_move_into_the_description(make_tool, provider_types):
    """Formats Gemini does not know, exclusive bounds, multipleOf and defaults are said in words."""
    schema = {"type": "object", "properties": {
        "mail": {"type": "string", "format": "email", "default": "a@b.c"},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5, "maximum": 1},
        "size": {"type": "integer", "format": "int64"},
    }}
    properties = _parameters(make_tool(schema), provider_types)["properties"]
    assert properties["mail"] == {"type": "STRING", "description": "format: email; default: a@b.c"}
    assert properties["ratio"] == {"type": "NUMBER", "maximum": 1,
                                   "description": "exclusiveMinimum: 0; multipleOf: 0.5"}
    assert properties["size"] == {"type": "INTEGER", "format": "int64"}


def test_property_ordering_keeps_the_declared_order(make_tool, provider_types):
    """Gemini orders properties alphabetically unless told: propertyOrdering keeps the author's order."""
    schema = {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "string"}}}
    assert _parameters(make_tool(schema), provider_types)["propertyOrdering"] == ["zeta", "alpha"]


def test_a_tool_without_parameters_has_no_parameters_field(make_tool, provider_types):
    """Gemini rejects an object without properties as parameters, so a no-argument tool declares none."""
    rendered = render_tool(make_tool({"type": "object", "properties": {}}), "gemini")
    assert rendered.tools == [{"name": "probe", "description": "probe for models."}]
    provider_types.gemini(rendered.tools[0])


def test_a_recursive_schema_leaves_only_that_tool_out(make_tool, recursive_schema, provider_types):
    """A recursive $ref cannot be inlined: that tool is left out with a located diagnostic, the others stay."""
    tree = make_tool(recursive_schema, tool_id="tree")
    plain = make_tool({"type": "object", "properties": {"q": {"type": "string"}}}, tool_id="plain")
    rendered = render_tools([tree, plain], "gemini")
    assert [t["name"] for t in rendered.tools] == ["plain"]
    [diagnostic] = rendered.diagnostics
    assert diagnostic.startswith("probe.yaml:")
    assert "tool 'tree' left out of the gemini format: recursive $ref '#/$defs/Node'" in diagnostic
    provider_types.gemini(rendered.tools[0])


def test_a_parameter_name_gemini_refuses_leaves_the_tool_out(make_tool):
    """Gemini parameter names are letters, digits and underscores: 'dry-run' leaves the tool out, saying so."""
    rendered = render_tool(make_tool({"type": "object", "properties": {"dry-run": {"type": "boolean"}}}), "gemini")
    assert rendered.tools == []
    assert "does not accept the parameter name 'dry-run'" in rendered.diagnostics[0]


def test_alternatives_that_only_add_constraints_take_the_parent_type(make_tool, provider_types):
    """``type: string`` with ``anyOf`` of patterns gives each alternative the string type."""
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "anyOf": [{"pattern": "^[A-Z]{3}$"}, {"pattern": "^[0-9]{3}$"}]},
    }}
    code = _parameters(make_tool(schema), provider_types)["properties"]["code"]
    assert code == {"type": "STRING", "anyOf": [{"type": "STRING", "pattern": "^[A-Z]{3}$"},
                                                {"type": "STRING", "pattern": "^[0-9]{3}$"}]}
