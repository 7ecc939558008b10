"""The trace of a chat turn: one entry per tool call, like LangChain4j's ``Result.toolExecutions()``.

Returned in the response's ``tool_executions`` field, each entry as::

    {"id": "call_1", "tool": "square_root", "arguments": {"x": 475695037565}, "result": 689706.486532,
     "is_error": false, "side": "server", "duration_ms": 0.4, "round": 1}

``error`` is added when ``is_error`` is true; ``arguments`` is the text the model sent when it was not JSON.
``side: client`` entries are results the caller sent back for calls handed to it (their ``duration_ms`` is
null: the gateway did not time them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results import ToolResult


@dataclass(frozen=True)
class ToolExecution:
    id: str
    tool: str
    arguments: Any
    result: Any
    is_error: bool
    side: str
    duration_ms: float | None
    round: int
    error: str | None = None

    @classmethod
    def of(cls, call_id: str, arguments: Any, result: ToolResult, round_number: int,
           timed: bool = True) -> ToolExecution:
        return cls(call_id, result.tool, arguments, result.value, result.is_error, result.side,
                   round(result.duration_s * 1000, 3) if timed else None, round_number, result.error)

    def as_dict(self) -> dict[str, Any]:
        entry = {"id": self.id, "tool": self.tool, "arguments": self.arguments, "result": self.result,
                 "is_error": self.is_error, "side": self.side, "duration_ms": self.duration_ms, "round": self.round}
        if self.error is not None:
            entry["error"] = self.error
        return entry
