"""OpenAI non-strict function tools: the Chat Completions shape, JSON Schema kept, arrays always with items."""

from __future__ import annotations

from gateway.formats import render_tool


def test_a_function_tool_in_the_chat_completions_shape(make_tool, provider_types):
    """``{"type": "function", "function": {name, description, parameters}}`` with no strict flag."""
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1, "default": "x"}}}
    [declaration] = render_tool(make_tool(schema, tool_id="search"), "openai").tools
    provider_types.openai(declaration)
    assert declaration == {"type": "function", "function": {
        "name": "search", "description": "search for models.", "parameters": schema}}


def test_arrays_always_have_items(make_tool, provider_types):
    """An array without items gets ``items: {}``; a tuple (prefixItems) gets items allowing its members."""
    schema = {"type": "object", "properties": {
        "tags": {"type": "array"},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        "nested": {"anyOf": [{"type": "array"}, {"type": "string"}]},
    }}
    [declaration] = render_tool(make_tool(schema), "openai").tools
    properties = provider_types.openai(declaration)["properties"]
    assert properties["tags"]["items"] == {}
    assert properties["pair"]["items"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert properties["nested"]["anyOf"][0]["items"] == {}
