"""Tool definitions bound to HTTP, as mappings, for the binding tests.

A module of its own rather than conftest.py: ``from conftest import`` finds whichever conftest was imported
first when several test directories run in one session.
"""

from __future__ import annotations

from typing import Any


def http_tool(http: dict[str, Any], properties: dict[str, Any] | None = None, required: tuple[str, ...] = (),
              tool_id: str = "t", **extra: Any) -> dict[str, Any]:
    """A tool definition (as a mapping) bound to ``http``, with an input schema of ``properties``."""
    tool: dict[str, Any] = {"id": tool_id, "name": tool_id, "user_description": "u", "ai_description": "a",
                            "binding": {"http": http}, **extra}
    if properties is not None:
        tool["input_schema"] = {"type": "object", "properties": properties, "required": list(required)}
    return tool
