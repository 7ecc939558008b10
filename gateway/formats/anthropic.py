"""Anthropic Messages API tools: ``{name, description, input_schema}``.

Claude takes JSON Schema nearly whole; what it refuses is ``anyOf``/``oneOf``/``allOf`` at the root of
``input_schema`` (``prepare`` merges those into one object) and property keys outside ``[a-zA-Z0-9_.-]{1,64}``.

``SEARCH_TOOLS``: Anthropic's tool search (beta ``advanced-tool-use-2025-11-20``), BM25 or regex, searched by
Anthropic (``gateway.formats.deferred`` puts it before the tools, each marked ``defer_loading``).
"""

from __future__ import annotations

import re
from typing import Any

from ..catalog.snapshot import Tool
from .adapt import check_parameter_names, prepare, tool_description

PARAMETER_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")


def render(tool: Tool) -> dict[str, Any]:
    """The tool as an ``anthropic.types.ToolParam`` dict."""
    description, schema = tool_description(tool, prepare(tool.input_schema, keep_cycles=True))
    check_parameter_names(schema, PARAMETER_NAME, "Anthropic")
    return {"name": tool.id, "description": description, "input_schema": schema}


# Anthropic's own tool-search tools, by the variant a caller asks for.
SEARCH_TOOLS = {"bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
                "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}}
