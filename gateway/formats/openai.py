"""OpenAI function tools: Chat Completions' ``{"type": "function", "function": {name, description, parameters}}``,
and the Responses API's flat ``{"type": "function", name, description, parameters, strict}``.

``openai`` sends the schema as JSON Schema (references inlined, root a plain object, arrays with ``items``);
``openai-strict`` adds ``strict: true`` and the strict-mode transformation (strict.py); ``openai-responses`` is
``openai``'s schema in the Responses API's shape, with ``strict: false`` said outright (Responses would otherwise
try strict mode on a schema made for non-strict).

``SEARCH_TOOLS``: the Responses API's tool search (``tool_search``; gpt-5.4 and later), executed by OpenAI
(``server``) or by the caller (``client``: the model asks with a query, the caller answers with the tools
``GET /tools/search?format=openai-responses`` finds, in a ``tool_search_output`` item).
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


def render_responses(tool: Tool) -> dict[str, Any]:
    """The tool as a Responses API ``FunctionToolParam`` dict."""
    return {**render(tool)["function"], "type": "function", "strict": False}


def render_strict(tool: Tool) -> dict[str, Any]:
    """The tool as a ``ChatCompletionToolParam`` dict with ``strict: true``."""
    description, parameters = tool_description(tool, strict_schema(tool.input_schema))
    return _function(tool, description, parameters, strict=True)


def _function(tool: Tool, description: str, parameters: dict[str, Any], strict: bool = False) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.id, "description": description, "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


# The Responses API's tool search, by who executes it. Executed by the caller, the model calls it with a query.
SEARCH_TOOLS = {
    "server": {"type": "tool_search"},
    "client": {"type": "tool_search", "execution": "client",
               "description": "Finds the tools that can do what is asked, among many: say what the tool must do.",
               "parameters": {"type": "object", "properties": {"query": {
                   "type": "string", "description": "What the tool sought must do, in a few words."}},
                   "required": ["query"], "additionalProperties": False}},
}
