"""MCP Tool entries: schemas as declared, title from the display name, annotations as MCP's camelCase hints,
and an outputSchema MCP accepts (non-object results wrapped as {"result": …})."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mcp.types
from jsonschema import Draft202012Validator
from support import EXAMPLES, catalog_for

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


def _type_lists(node: Any, where: str) -> Iterator[str]:
    """Where a ``type`` keyword below ``node`` is a list (``["string", "null"]``)."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), list):
            yield f"{where}: type {node['type']}"
        for key, value in node.items():
            yield from _type_lists(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _type_lists(value, f"{where}/{index}")


def test_no_shipped_tool_has_a_type_list_in_its_input_schema():
    """Every shipped tool's input schema, declared or derived from a signature, gives each schema one type
    (a nullable value is ``anyOf`` with ``{type: "null"}``): MCP Inspector warns on ``type: [string, "null"]``."""
    found = [spot for tool in catalog_for(EXAMPLES).tools.values()
             for spot in _type_lists(tool.input_schema, tool.id)]
    assert found == []
