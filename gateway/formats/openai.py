"""OpenAI Chat Completions function tools: ``{"type": "function", "function": {name, description, parameters}}``.

``openai`` sends the schema as JSON Schema (references inlined, root a plain object, arrays with ``items``);
``openai-strict`` adds ``strict: true`` and the strict-mode transformation (strict.py).
"""

from __future__ import annotations

from typing import Any

from ..catalog.snapshot import Tool
from .adapt import prepare, tool_description
from .strict import strict_schema


def render(tool: Tool) -> dict[str, Any]:
    """The tool as a non-strict ``ChatCompletionToolParam`` dict."""
    description, parameters = tool_description(tool, prepare(tool.input_schema, keep_cycles=True))
    return _function(tool, description, parameters)


def render_strict(tool: Tool) -> dict[str, Any]:
    """The tool as a ``ChatCompletionToolParam`` dict with ``strict: true``."""
    description, parameters = tool_description(tool, strict_schema(tool.input_schema))
    return _function(tool, description, parameters, strict=True)


def _function(tool: Tool, description: str, parameters: dict[str, Any], strict: bool = False) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.id, "description": description, "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}
