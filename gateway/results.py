"""A call's result (``ToolResult``), and how a tool's value becomes one (``normalise``): a JSON value and the text an
LLM reads, checked against the output schema and capped at ``max_result_chars``; content blocks
(``gateway.content.blocks``) kept beside them. Used by the call path (``gateway.invoke``) and by the chat loop for the
results its caller hands back.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .catalog.snapshot import Tool
from .content.blocks import Block, Content, bounded, returned_blocks, served, text_of
from .content.surrogates import LONE, replace_lone, scrub
from .content.truncation import truncate
from .errors import ToolError
from .schema.argerrors import describe


@dataclass(frozen=True)
class ToolResult:
    tool: str
    is_error: bool
    value: Any  # the structured result (a JSON value or a string); None on error
    text: str  # what an LLM reads
    error: str | None = None
    side: str = "server"
    duration_s: float = 0.0
    truncated: bool = False
    structured: bool = False  # the tool has an output schema and ``value`` passed it
    # Why an error is one (gateway.events.CALL_OUTCOMES); "" for a result a filter made: judged by is_error.
    outcome: str = ""
    retry_after_s: float | None = None  # a call refused by a rate limit: when one would be taken
    content: tuple[Block, ...] | None = None  # MCP content blocks the tool answered with (gateway.content.blocks)
    connect_url: str | None = None  # a ConnectionNeeded error: where its person connects (MCP: URL elicitation)
    approval: Mapping[str, Any] | None = None  # a call pending approval: its id, status and URL (REST answers 202)

    def blocks(self) -> list[Block]:
        """The MCP content blocks to send: the tool's own, or the text as one (``gateway.content.blocks.served``)."""
        return served(self.text, self.content)

    def as_dict(self) -> dict[str, Any]:
        """The REST shape: ``{"tool", "is_error", "result", "text"}`` plus ``error`` on failure, and ``content``
        when the tool answered with content blocks."""
        body: dict[str, Any] = {"tool": self.tool, "is_error": self.is_error, "result": self.value, "text": self.text}
        if self.content is not None:
            body["content"] = self.blocks()
        if self.error is not None:
            body["error"] = self.error
        if self.truncated:
            body["truncated"] = True
        if self.approval is not None:
            body["approval"] = dict(self.approval)
        return body


def error_result(tool_id: str, message: str, side: str = "server", outcome: str = "error",
                 connect_url: str | None = None, approval: Mapping[str, Any] | None = None) -> ToolResult:
    message = replace_lone(message)  # an upstream's error text may hold what no client can decode
    return ToolResult(tool=tool_id, is_error=True, value=None, text=message, error=message, side=side, outcome=outcome,
                      connect_url=connect_url, approval=approval)


def normalise(tool: Tool, value: Any, side: str, max_chars: int) -> ToolResult:
    """A JSON value and the text an LLM reads, checked against the output schema and capped in size; content
    blocks (``gateway.content.blocks``) are kept, the text theirs and the cap theirs."""
    content = value if value.__class__ is Content else None if value.__class__ in _PLAIN else returned_blocks(value)
    if content is not None:
        return _with_blocks(tool, content, side, max_chars)
    try:
        value = to_json(value)
    except TypeError as exc:
        raise ToolError(f"Tool '{tool.id}' returned a value that is not JSON: {exc}") from None
    text = value if isinstance(value, str) else _text(value)
    if not text.isascii() and LONE.search(text):
        # Lone surrogates (a tool's bad str, an upstream's "\ud800") cannot be encoded to any client: U+FFFD.
        value, text = scrub(value), replace_lone(text)
    structured = _checked(tool, value)
    truncated = len(text) > max_chars
    if truncated:
        text = truncate(text, max_chars)
        if isinstance(value, str):
            value = text
    return ToolResult(tool=tool.id, is_error=False, value=value, text=text, side=side, truncated=truncated,
                      structured=structured)


_PLAIN = frozenset({str, int, float, bool, dict, type(None)})  # values that are never content blocks


def _with_blocks(tool: Tool, content: Content, side: str, max_chars: int) -> ToolResult:
    """A result of content blocks: its text is theirs (cut with them to ``max_chars``), its value the structured
    result, or that text."""
    if not content.blocks and content.value is not None:  # nothing to read but the structured result: its JSON
        return normalise(tool, content.value, side, max_chars)
    blocks, truncated = bounded(content.blocks, max_chars)
    blocks = tuple(scrub(list(blocks)))  # lone surrogates, as for any result
    text = text_of(blocks)
    try:
        value = text if content.value is None else scrub(to_json(content.value))
    except TypeError as exc:
        raise ToolError(f"Tool '{tool.id}' returned a value that is not JSON: {exc}") from None
    return ToolResult(tool=tool.id, is_error=False, value=value, text=text, side=side, truncated=truncated,
                      structured=_checked(tool, value), content=blocks)


def _checked(tool: Tool, value: Any) -> bool:
    """Whether the tool has an output schema, which ``value`` matches; ``ToolError`` when it does not."""
    if tool.output_validator is None:
        return False
    errors = list(tool.output_validator.iter_errors(value))
    if errors:
        from jsonschema.exceptions import relevance  # errors were found: jsonschema is loaded

        detail = describe(max(errors, key=relevance), tool.output_validator.schema)[0]
        raise ToolError(f"Tool '{tool.id}' returned a result that does not match its output schema: {detail}")
    return True


def _text(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``; a number, boolean or null spelt directly, as json.dumps spells it
    (its encoder's set-up is most of the cost of a scalar result)."""
    kind = value.__class__
    if kind is int:
        return int.__repr__(value)
    if kind is float:  # finite: to_json refused the others
        return float.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


# How deeply a result may nest: every consumer of a result (the output validator, json.dumps, the MCP SDK's
# models) recurses once or more per level, so an upstream's answer nested 1,000 deep would be a RecursionError.
MAX_RESULT_DEPTH = 100


def to_json(value: Any, depth: int = 0) -> Any:
    """Plain JSON data from what tools commonly return (dataclasses, enums, dates, tuples, sets)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{value} has no JSON representation")
        return value
    if depth >= MAX_RESULT_DEPTH and isinstance(value, (dict, list, tuple, set, frozenset)):
        raise TypeError(f"it nests objects and arrays more than {MAX_RESULT_DEPTH} levels deep")
    if isinstance(value, dict):
        return {str(k): to_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v, depth + 1) for v in value]
    if isinstance(value, enum.Enum):
        return to_json(value.value, depth)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(dataclasses.asdict(value), depth)
    if hasattr(value, "model_dump"):  # pydantic models
        return to_json(value.model_dump(mode="json"), depth)
    raise TypeError(f"object of type {type(value).__name__} is not JSON serializable")
