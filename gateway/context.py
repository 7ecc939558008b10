"""What a call knows besides its arguments: who asks, in which conversation, on which side.

Bindings may pass these values on to the tool (a Python function receives those it declares by name) but they
are never part of the schema the LLM sees. ``progress``, ``log`` and ``client`` talk to the calling client while
the tool runs (``gateway.client_channel``): the surface sets the channel, silent unless it can carry them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .client_channel import SILENT, ClientChannel, ToolLog

# Parameters that talk to the calling client: a tool declaring one is served so that it can (an SSE answer on MCP).
TALKING_PARAMETERS = frozenset({"progress", "log", "client"})
# Parameter names a Python tool may declare to receive context instead of arguments.
CONTEXT_PARAMETERS = frozenset({"context", "conversation_id", "user", "tool_call_id", "tool_id", "side", "metadata",
                                *TALKING_PARAMETERS})


class SubjectToken:
    """The caller's own access token, kept for one purpose: to exchange it (RFC 8693) for a token an upstream
    accepts. Never sent upstream as it is (MCP forbids token passthrough), and never shown: its repr and str say
    only that it is there, so a context printed in a log line or a traceback leaks nothing."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "SubjectToken(<hidden>)"

    __str__ = __repr__


@dataclass(frozen=True)
class CallContext:
    conversation_id: str | None = None
    user: str | None = None
    tool_call_id: str | None = None
    side: str = "server"  # where the caller wants it run: "server", or "client" for the browser bridge
    session: str | None = None  # browser bridge session that may execute client tools
    metadata: dict[str, Any] = field(default_factory=dict)
    surface: str | None = None  # what the call came in by: "rest", "mcp", "chat", "cli" (filters may ask)
    caller: str | None = None  # the name of the API key the call came with, or oauth:<user> (None with auth off)
    client_id: str | None = None  # with an OAuth access token: the client it was issued to, and its issuer
    issuer: str | None = None
    subject_token: SubjectToken | None = None  # that OAuth caller's token, for token exchange (never passed on)
    traceparent: str | None = None  # the caller's W3C trace context, when it sent one
    client: ClientChannel = SILENT  # what the tool may say to its caller while it runs (gateway.client_channel)

    def value(self, name: str, tool_id: str) -> Any:
        """The value injected into a parameter called ``name``."""
        if name == "context":
            return self
        if name == "tool_id":
            return tool_id
        if name == "progress":
            return self.client.progress
        if name == "log":
            return ToolLog(self.client)
        return getattr(self, name)


# What runs a tool's call: a binding makes one (gateway.bindings), the catalog's tool holds it, invoke awaits it.
Executor = Callable[[dict[str, Any], CallContext], Awaitable[Any]]
