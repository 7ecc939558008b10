"""An Anthropic Messages client, translating the loop's Chat Completions messages at the edge.

    system / developer messages      → ``system``
    assistant ``tool_calls``         → ``tool_use`` blocks
    ``role: tool`` messages          → ``tool_result`` blocks in a user turn (``is_error`` kept; a result's
                                       images as image blocks, its other blocks as text, ``gateway.content.blocks``)
    consecutive turns of one role    → merged, since Anthropic wants user and assistant to alternate

Request parameters with an Anthropic equivalent are mapped (``max_tokens``/``max_completion_tokens``,
``temperature``, ``top_p``, ``stop``, ``user``); others have none and are not sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ...content.blocks import line
from ..messages import CONTENT_BLOCKS, ModelReply, ModelRequest, ProviderError, ToolCall, text_of, tool_call
from .base import HttpProvider

API_VERSION = "2023-06-01"
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "tool_use": "tool_calls",
                  "max_tokens": "length", "refusal": "content_filter"}
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # what an image block takes


class AnthropicProvider(HttpProvider):
    tool_format = "anthropic"
    # Anthropic refuses a history holding tool_use blocks unless tools are declared, so a final call keeps
    # the tools and forbids their use with tool_choice none.
    keeps_tools_for_history = True

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def declare_caller_tool(self, spec: dict[str, Any]) -> dict[str, Any]:
        function = spec.get("function") or {}
        declared = {"name": function.get("name", ""), "input_schema": function.get("parameters") or {"type": "object"}}
        if function.get("description"):
            declared["description"] = function["description"]
        return declared

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        params = {**self.config.params, **request.params}
        system, messages = to_anthropic(request.messages)
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": params.get("max_tokens") or params.get("max_completion_tokens") or self.config.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        for name in ("temperature", "top_p", "top_k"):
            if params.get(name) is not None:
                body[name] = params[name]
        if params.get("stop"):
            body["stop_sequences"] = [params["stop"]] if isinstance(params["stop"], str) else list(params["stop"])
        if params.get("user"):
            body["metadata"] = {"user_id": str(params["user"])}
        if request.tools:
            body["tools"] = request.tools
            choice = tool_choice(request.tool_choice, params.get("parallel_tool_calls"))
            if choice is not None:
                body["tool_choice"] = choice
        if stream:
            body["stream"] = True
        return body

    async def complete(self, request: ModelRequest) -> ModelReply:
        data = await self.post_json("/v1/messages", self.body(request, stream=False), request.headers)
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ProviderError(f"LLM provider '{self.name}' answered without content blocks.")
        with self.malformed():
            text = "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
            calls = tuple(tool_call(b.get("id"), b.get("name"), _object(b.get("input")))
                          for b in data["content"] if b.get("type") == "tool_use")
            return ModelReply(text, calls, _finish(data.get("stop_reason"), calls),
                              data.get("model") or request.model, _usage(data.get("usage")))

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]:
        """Text as it arrives, then the whole reply."""
        events = _Events(request.model)
        async for event, data in self.events("/v1/messages", self.body(request, stream=True), request.headers):
            kind = data.get("type", event) if isinstance(data, dict) else event
            if kind == "error":
                raise self.stream_error(data if isinstance(data, dict) else {})
            with self.malformed():
                texts = events.add(kind, data)
            for text in texts:
                yield text
        with self.malformed():
            reply = events.reply()
        yield reply


class _Events:
    """A streamed reply, gathered event by event."""

    def __init__(self, model: str):
        self.parts: list[str] = []
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop: str | None = None
        self.model = model
        self.usage: dict[str, Any] = {}

    def add(self, kind: str, data: Any) -> list[str]:
        """Take one event; returns its text."""
        texts: list[str] = []
        if kind == "message_start":
            message = data.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                self.blocks[data.get("index", len(self.blocks))] = {"id": block.get("id"), "name": block.get("name"),
                                                                   "json": ""}
            elif block.get("text"):
                texts.append(str(block["text"]))
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                texts.append(str(delta["text"]))
            elif delta.get("type") == "input_json_delta" and data.get("index") in self.blocks:
                self.blocks[data["index"]]["json"] += delta.get("partial_json", "")
        elif kind == "message_delta":
            self.stop = (data.get("delta") or {}).get("stop_reason") or self.stop
            self.usage.update(data.get("usage") or {})
        self.parts += texts
        return texts

    def reply(self) -> ModelReply:
        # An empty input streams no JSON at all: that is the object {}.
        calls = tuple(tool_call(b["id"], b["name"], b["json"] or "{}") for _, b in sorted(self.blocks.items()))
        return ModelReply("".join(self.parts), calls, _finish(self.stop, calls), self.model, _usage(self.usage))


def _object(value: Any) -> dict[str, Any]:
    """A tool_use block's input, which Anthropic always sends as an object (absent: no arguments)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"a tool_use input that is a {type(value).__name__}, not an object")
    return value


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, Anthropic messages) from Chat Completions messages."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(text_of(message.get("content")))
            continue
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""),
                                     "content": _result_content(message)}
            if message.get("is_error"):
                block["is_error"] = True
            role, blocks = "user", [block]
        elif role == "assistant":
            blocks = _text_blocks(message.get("content"))
            blocks += [{"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                        "input": _input(call["function"].get("arguments"))} for call in message.get("tool_calls") or []]
        else:
            role, blocks = "user", _user_blocks(message.get("content"))
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(s for s in system if s), turns


def _result_content(message: dict[str, Any]) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, or, for a result with content blocks, its images as image blocks and
    every other block as the text an LLM reads of it."""
    blocks = message.get(CONTENT_BLOCKS)
    if not blocks:
        return text_of(message.get("content"))
    parts = []
    for block in blocks:
        if block.get("type") == "image" and block.get("mimeType") in IMAGE_TYPES:
            parts.append({"type": "image", "source": {"type": "base64", "media_type": block["mimeType"],
                                                      "data": block["data"]}})
        elif text := line(block):  # Anthropic refuses empty text blocks
            parts.append({"type": "text", "text": text})
    return parts


def tool_choice(choice: Any, parallel: bool | None) -> dict[str, Any] | None:
    """OpenAI's ``tool_choice`` (and ``parallel_tool_calls``) in Anthropic's terms."""
    if isinstance(choice, Mapping):
        mapped: dict[str, Any] = {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    elif choice in ("required", "any"):
        mapped = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    elif choice == "auto" or parallel is False:
        mapped = {"type": "auto"}
    else:
        return None
    if parallel is False:
        mapped["disable_parallel_tool_use"] = True
    return mapped


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    text = text_of(content)
    return [{"type": "text", "text": text}] if text else []  # Anthropic refuses empty text blocks


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return _text_blocks(content)
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith("data:") and ";base64," in url:
                media_type, _, data = url[5:].partition(";base64,")
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
            elif url:
                blocks.append({"type": "image", "source": {"type": "url", "url": url}})
    return blocks


def _input(arguments: Any) -> Any:
    # A tool_use input must be an object; malformed arguments were already answered as an error result.
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _finish(stop: str | None, calls: tuple[ToolCall, ...]) -> str:
    return "tool_calls" if calls else FINISH_REASONS.get(stop or "end_turn", "stop")


def _usage(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    if not usage:
        return None
    prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
