"""A chat request as the loop needs it, read and checked from an OpenAI Chat Completions body.

Beside the standard fields, the body may carry a ``gateway`` object (the openai SDK sends it with
``extra_body={"gateway": {...}}``)::

    "gateway": {
      "toolsets": ["math"],          # offer tools of these toolsets (default: chat.toolsets in the settings)
      "tags": ["example"],           # ... with these tags (default: chat.tags)
      "tools": ["square_root"],      # ... and only these ids (an allowlist)
      "side": "client",              # tools with scope all run in the caller too (default: server)
      "conversation_id": "c-42",     # also from the X-Conversation-Id header or metadata.conversation_id
      "tool_selection": {"search": {"k": 8}}   # or "all" (default: chat.tool_selection; gateway.loop.selection)
    }

``user`` and ``metadata`` (standard fields) reach tools through their CallContext.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadRequest
from .messages import text_of
from .selection import Selection, parse_selection

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# Fields the gateway acts on itself; every other field is a model parameter passed to the provider.
CONSUMED = frozenset({"model", "messages", "tools", "tool_choice", "stream", "stream_options", "gateway",
                      "metadata", "n", "functions", "function_call"})
_GATEWAY_KEYS = frozenset({"toolsets", "tags", "tools", "side", "conversation_id", "tool_selection"})


class InvalidRequest(BadRequest):
    """A chat request refused as OpenAI refuses one: ``param`` names the field (a JSON path such as
    ``messages[0].role``), ``code`` is OpenAI's code for the problem where it has one, else None."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[dict[str, Any], ...]
    model: str | None = None
    stream: bool = False
    include_usage: bool = False
    tool_choice: Any = None
    # Functions the caller declares and executes itself (the standard ``tools`` field).
    caller_tools: tuple[dict[str, Any], ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    toolsets: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    client_side: bool = False
    conversation_id: str | None = None
    user: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    traceparent: str | None = None  # the caller's W3C trace context (the traceparent header), when it sent one
    tool_selection: Selection | str | None = None  # None: as the settings' chat.tool_selection says

    @property
    def conversation_text(self) -> str:
        """The user's messages so far, the latest last: what a turn's tools are searched for."""
        return "\n".join(text_of(m.get("content")) for m in self.messages if m.get("role") == "user")

    @property
    def latest_user_text(self) -> str:
        return next((text_of(m.get("content")) for m in reversed(self.messages) if m.get("role") == "user"), "")


def parse_chat_request(body: Any, conversation_header: str | None = None) -> ChatRequest:
    """Check a request body; ``InvalidRequest`` names the offending field by its JSON path."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array of messages.", "messages",
                             "missing_required_parameter" if messages is None else None)
    for index, message in enumerate(messages):
        _check_message(index, message)
    if body.get("n") not in (None, 1):
        raise InvalidRequest("'n' must be 1: the gateway runs one conversation per request.", "n")
    if body.get("functions") is not None or body.get("function_call") is not None:
        raise InvalidRequest("'functions' and 'function_call' are deprecated: use 'tools' and 'tool_choice'.",
                             "functions" if body.get("functions") is not None else "function_call")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidRequest("'model' must be a string.", "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InvalidRequest("'stream' must be true or false.", "stream")
    stream_options = body.get("stream_options") or {}
    extension = body.get("gateway") or {}
    if not isinstance(extension, dict):
        raise InvalidRequest("'gateway' must be an object.", "gateway")
    unknown = sorted(set(extension) - _GATEWAY_KEYS)
    if unknown:
        raise InvalidRequest(f"gateway: unknown field(s) {', '.join(unknown)} (known: "
                             f"{', '.join(sorted(_GATEWAY_KEYS))})", f"gateway.{unknown[0]}")
    try:
        selection = None if extension.get("tool_selection") is None else parse_selection(
            extension["tool_selection"], "gateway.tool_selection")
    except ValueError as exc:
        raise InvalidRequest(str(exc), "gateway.tool_selection") from None
    side = extension.get("side", "server")
    if side not in ("server", "client"):
        raise InvalidRequest(f"gateway.side: expected 'server' or 'client', got {side!r}", "gateway.side")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidRequest("'metadata' must be an object.", "metadata")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidRequest("'user' must be a string.", "user")
    conversation = extension.get("conversation_id") or conversation_header or metadata.get("conversation_id")
    return ChatRequest(
        messages=tuple(messages),
        model=model or None,
        stream=stream,
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        caller_tools=tuple(_caller_tools(body.get("tools"))),
        params={k: v for k, v in body.items() if k not in CONSUMED},
        toolsets=_names("gateway.toolsets", extension.get("toolsets")),
        tags=_names("gateway.tags", extension.get("tags")),
        tools=_names("gateway.tools", extension.get("tools")),
        client_side=side == "client",
        conversation_id=str(conversation) if conversation is not None else None,
        user=user,
        metadata=metadata,
        tool_selection=selection,
    )


def _check_message(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"{where}: expected an object with 'role' and 'content'.", where)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:  # a list or an object is unhashable: no set lookup
        raise InvalidRequest(f"{where}.role: expected one of {', '.join(sorted(ROLES))}, got {role!r}", f"{where}.role")
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise InvalidRequest(f"{where}.content: expected a string or an array of content parts.", f"{where}.content")
    for position, part in enumerate(content if isinstance(content, list) else ()):
        # A text part's text is joined into the message's text (offer rules, providers): it must be a string.
        if isinstance(part, dict) and part.get("type") == "text" and not isinstance(part.get("text", ""), str):
            raise InvalidRequest(f"{where}.content[{position}].text: expected a string.",
                                 f"{where}.content[{position}].text")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise InvalidRequest(f"{where}: a tool message needs 'tool_call_id', the id of the call it answers.",
                             f"{where}.tool_call_id")
    calls = message.get("tool_calls")
    if calls is None:
        return
    if role != "assistant" or not isinstance(calls, list):
        raise InvalidRequest(f"{where}.tool_calls: only an assistant message carries tool_calls, as an array.",
                             f"{where}.tool_calls")
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call.get("id") if isinstance(call, dict) else None, str) or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str):
            raise InvalidRequest(f"{where}.tool_calls[{position}]: expected {{id, type: function, function: "
                                 "{{name, arguments}}}}.", f"{where}.tool_calls[{position}]")


def _tool_choice(choice: Any) -> Any:
    if choice is None or choice in ("auto", "required", "none"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" \
            and isinstance((choice.get("function") or {}).get("name"), str):
        return choice
    raise InvalidRequest("'tool_choice' must be 'auto', 'required', 'none' or {type: function, function: {name}}.",
                         "tool_choice")


def _caller_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidRequest("'tools' must be an array of {type: function, function: {...}}.", "tools")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str):
            raise InvalidRequest(f"tools[{index}]: expected {{type: function, function: {{name, description, "
                                 "parameters}}}}.", f"tools[{index}]")
    return tools


def _names(where: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{where}: expected an array of strings.", where)
    return tuple(value)
