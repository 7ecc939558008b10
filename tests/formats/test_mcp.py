"""MCP Tool entries: schemas as declared, title from the display name, annotations as MCP's camelCase hints,
and an outputSchema MCP accepts (non-object results wrapped as {"result": …})."""

from __future__ import annotations

import mcp.types
from jsonschema import Draft202012Validator

from gateway.formats import render_tool
from gateway.formats.mcp import structured_content


def test_title_description_and_annotations(make_tool, provider_types):
    """name is the id, title the display name, description the ai_description, hints camelCase."""
    tool = make_tool({"type": "object", "properties": {}}, tool_id="lamp",
                     annotations={"read_only": True, "destructive": False, "idempotent": True, "open_world": False})
    [declaration] = render_tool(tool, "mcp").tools
    parsed: mcp.types.Tool = provider_types.mcp(declaration)
    assert (parsed.name, parsed.title, parsed.description) == ("lamp", "lamp title", "lamp for models.")
    assert declaration["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                          "openWorldHint": False}
    assert parsed.annotations == mcp.types.ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                                           idempotent_hint=True, open_world_hint=False)
    assert "outputSchema" not in declaration


def test_input_schema_is_served_as_declared(make_tool, recursive_schema, provider_types):
    """MCP speaks JSON Schema 2020-12: even a recursive schema is served unchanged."""
    [declaration] = render_tool(make_tool(recursive_schema), "mcp").tools
    assert provider_types.mcp(declaration).input_schema == recursive_schema


def test_object_output_schema_is_declared_as_is(make_tool, provider_types):
    """An object output schema is the outputSchema, and results are their own structured content."""
    output = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
    tool = make_tool({"type": "object"}, output_schema=output)
    [declaration] = render_tool(tool, "mcp").tools
    assert provider_types.mcp(declaration).output_schema == output
    assert structured_content(tool, {"seconds": 1.0}) == {"seconds": 1.0}


def test_a_non_object_output_schema_is_wrapped_as_result(make_tool, provider_types):
    """A list result is declared as {"result": [...]} (definitions moved to the new root), and wrapped so."""
    output = {"$defs": {"Light": {"type": "object", "properties": {"id": {"type": "integer"}}}},
              "type": "array", "items": {"$ref": "#/$defs/Light"}}
    tool = make_tool({"type": "object"}, output_schema=output)
    [declaration] = render_tool(tool, "mcp").tools
    schema = provider_types.mcp(declaration).output_schema
    assert schema["required"] == ["result"] and schema["$defs"] == output["$defs"]
    content = structured_content(tool, [{"id": 1}])
    assert content == {"result": [{"id": 1}]}
    assert Draft202012Validator(schema).is_valid(content)
    assert not Draft202012Validator(schema).is_valid({"result": [{"id": "one"}]})
