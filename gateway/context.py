"""What a call knows besides its arguments: who asks, in which conversation, on which side.

Bindings may pass these values on to the tool (a Python function receives those it declares by name) but they
are never part of the schema the LLM sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Parameter names a Python tool may declare to receive context instead of arguments.
CONTEXT_PARAMETERS = frozenset({"context", "conversation_id", "user", "tool_call_id", "tool_id", "side", "metadata"})


@dataclass(frozen=True)
class CallContext:
    conversation_id: str | None = None
    user: str | None = None
    tool_call_id: str | None = None
    side: str = "server"  # where the caller wants it run: "server", or "client" for the browser bridge
    session: str | None = None  # browser bridge session that may execute client tools
    metadata: dict[str, Any] = field(default_factory=dict)
    surface: str | None = None  # what the call came in by: "rest", "mcp", "chat", "cli" (filters may ask)
    caller: str | None = None  # the name of the API key the call came with (None with auth off)
    traceparent: str | None = None  # the caller's W3C trace context, when it sent one

    def value(self, name: str, tool_id: str) -> Any:
        """The value injected into a parameter called ``name``."""
        if name == "context":
            return self
        if name == "tool_id":
            return tool_id
        return getattr(self, name)
