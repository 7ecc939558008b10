"""The loop's message vocabulary, shared by the loop and every provider client: a request to a model, its reply,
the tool calls in it, and the provider's failures.

The loop speaks one vocabulary, OpenAI Chat Completions messages (``{"role": "tool", ...}``), because that is what
our endpoint receives; each provider translates to and from its own wire format at its edge
(``gateway.loop.providers``). Kept apart from the provider clients so that the chat surface and its request
parsing load without them: a gateway with no provider configured never imports the clients.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GatewayError

Sleep = Callable[[float], Awaitable[None]]
# A tool message's extension field: the result's MCP content blocks (gateway.content.blocks), when one is no text, for a
# provider that takes images in a tool result (Anthropic); ``content`` stays the text, all that OpenAI takes.
CONTENT_BLOCKS = "content_blocks"


class ProviderError(GatewayError):
    """The LLM provider failed or refused; raised after retries. The message never holds a credential."""

    status = 502
    code = "provider_error"  # the gateway's own codes: OpenAI has none for an upstream LLM failing


class ProviderTimeout(ProviderError):
    status = 504
    code = "provider_timeout"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text exactly as the model wrote it; it may be malformed

    def as_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: list[dict[str, Any]]  # OpenAI Chat Completions messages
    tools: list[dict[str, Any]] = field(default_factory=list)  # already in the provider's declaration format
    tool_choice: Any = None  # OpenAI vocabulary: "auto" | "required" | "none" | {"type": "function", ...}
    params: Mapping[str, Any] = field(default_factory=dict)  # temperature, max_tokens, ... (OpenAI names)
    headers: Mapping[str, str] = field(default_factory=dict)  # sent on as they are (the trace's traceparent)


@dataclass(frozen=True)
class ModelReply:
    content: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str  # OpenAI vocabulary: stop | tool_calls | length | content_filter
    model: str
    usage: Mapping[str, int] | None = None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [call.as_openai() for call in self.tool_calls]
        return message


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """A call as a provider sent it, in the types the loop reads. Compatible servers differ: some send the
    arguments as a JSON object instead of JSON text, some a null name (then answered as an unknown tool)."""
    if arguments is None:
        arguments = ""
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(str(call_id) if call_id else new_call_id(), str(name or ""), arguments)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
    return str(content)
