"""MCP ``Tool`` entries (``tools/list``): the schemas as declared, since MCP speaks JSON Schema 2020-12 itself.

``title`` is the tool's display ``name``; ``description`` is what the model reads (``ai_description``). MCP wants
an object at the root of ``outputSchema`` (through revision 2025-11-25) and of ``structuredContent``: a tool that
returns anything else (a list, a number) is declared as ``{"result": <its schema>}``, marked
``x-fastmcp-wrap-result: true``, and its structured content must be wrapped the same way — ``structured_content``
does it, so the listing and the results agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalog.snapshot import Tool
from .adapt import model_text, types_of
from .refs import DEFINITIONS

# How a wrapped outputSchema says so to FastMCP's client (its own servers' convention), which then hands users the
# value itself (``.data == 4.0``) instead of a ``Root(result=4.0)`` object. An unknown keyword to JSON Schema, so
# validators (the official SDK's client) ignore it and every other client sees the same wrapped schema as before.
WRAP_MARK = "x-fastmcp-wrap-result"

# YAML annotation keys → MCP ToolAnnotations hint names.
ANNOTATIONS = {
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}


def render(tool: Tool) -> dict[str, Any]:
    """The tool as an ``mcp.types.Tool`` dict (camelCase keys, as on the wire)."""
    d = tool.definition
    entry: dict[str, Any] = {"name": tool.id}
    if d.name:
        entry["title"] = d.name
    entry["description"] = model_text(tool)
    entry["inputSchema"] = dict(tool.input_schema)
    if tool.output_schema is not None:
        entry["outputSchema"] = output_schema(tool.output_schema)
    hints = {ANNOTATIONS[key]: value for key, value in d.annotations.items() if key in ANNOTATIONS}
    if hints:
        entry["annotations"] = hints
    return entry


def wraps_result(schema: Mapping[str, Any]) -> bool:
    """Whether results of this output schema travel as ``{"result": value}`` (the root is not an object)."""
    return types_of(schema) != ["object"]


def output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``outputSchema`` to declare: ``schema`` itself, or wrapped as ``{"result": …}`` when not an object."""
    if not wraps_result(schema):
        return dict(schema)
    # The dialect and the definitions (#/$defs/X resolves from the root) move up to the new root.
    hoisted = ("$schema", *DEFINITIONS)
    inner = {key: value for key, value in schema.items() if key not in hoisted}
    wrapper: dict[str, Any] = {key: schema[key] for key in hoisted if key in schema}
    wrapper.update({"type": "object", "properties": {"result": inner}, "required": ["result"],
                    WRAP_MARK: True})
    return wrapper


def structured_content(tool: Tool, value: Any) -> dict[str, Any] | None:
    """The ``structuredContent`` for a result ``value`` matching the tool's output schema (None without one)."""
    schema = tool.output_schema
    if schema is None:
        return None
    return {"result": value} if wraps_result(schema) else value
