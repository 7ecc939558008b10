"""Anthropic Messages API tools: ``{name, description, input_schema}``.

Claude takes JSON Schema nearly whole; what it refuses is ``anyOf``/``oneOf``/``allOf`` at the root of
``input_schema`` (``prepare`` merges those into one object) and property keys outside ``[a-zA-Z0-9_.-]{1,64}``.

``deferred``: the same tools for Anthropic's tool search (beta ``advanced-tool-use-2025-11-20``): each marked
``defer_loading`` but the pinned ones, and the search tool itself first (BM25 or regex, searched by Anthropic).
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


def deferred(declarations: list[dict[str, Any]], pinned: frozenset[str], variant: str) -> list[dict[str, Any]]:
    """``declarations`` for tool search: the search tool, then each tool with ``defer_loading`` unless pinned
    (Anthropic refuses a request whose every tool is deferred, so the search tool never is)."""
    return [dict(SEARCH_TOOLS[variant]),
            *(declaration if declaration["name"] in pinned else {**declaration, "defer_loading": True}
              for declaration in declarations)]
