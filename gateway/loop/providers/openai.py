"""An OpenAI-compatible Chat Completions client (OpenAI, Azure, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter).

Compatible servers differ in small ways this client absorbs: tool calls without ids get one, a reply with tool
calls is treated as such whatever its ``finish_reason`` says, and streamed tool calls may arrive whole or in
fragments.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..messages import ModelReply, ModelRequest, ProviderError, ToolCall, text_of, tool_call
from .base import HttpProvider

# What a Chat Completions message may carry upstream; extension fields of our own endpoint stay behind.
MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})


class OpenAIProvider(HttpProvider):

    @property
    def tool_format(self) -> str:  # type: ignore[override]
        return "openai-strict" if self.config.strict_tools else "openai"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def declare_caller_tool(self, spec: dict[str, Any]) -> dict[str, Any]:
        return spec  # caller-defined tools arrive in this very format

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {**self.config.params, **request.params, "model": request.model,
                                "messages": [{k: v for k, v in m.items() if k in MESSAGE_KEYS} for m in request.messages]}
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        else:
            body.pop("parallel_tool_calls", None)  # OpenAI refuses it in a request without tools
        if stream:
            body["stream"] = True
        return body

    async def complete(self, request: ModelRequest) -> ModelReply:
        data = await self.post_json("/chat/completions", self.body(request, stream=False), request.headers)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
            raise ProviderError(f"LLM provider '{self.name}' answered without a message (no choices[0].message).")
        with self.malformed():
            message = choices[0]["message"]
            calls = tuple(_call(call) for call in _list(message.get("tool_calls")))
            return ModelReply(text_of(message.get("content")), calls, _finish(choices[0].get("finish_reason"), calls),
                              data.get("model") or request.model, _usage(data.get("usage")))

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]:
        """Text as it arrives, then the whole reply."""
        chunks = _Chunks(request.model)
        async for _, data in self.events("/chat/completions", self.body(request, stream=True), request.headers):
            if isinstance(data, dict) and data.get("error"):
                raise self.stream_error(data)
            with self.malformed():
                texts = chunks.add(data)
            for text in texts:
                yield text
        with self.malformed():
            reply = chunks.reply()
        yield reply


class _Chunks:
    """A streamed reply, gathered chunk by chunk; tool calls may arrive whole or in fragments."""

    def __init__(self, model: str):
        self.parts: list[str] = []
        self.slots: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.model = model
        self.usage: Any = None

    def add(self, data: Any) -> list[str]:
        """Take one chunk; returns its text."""
        if not isinstance(data, dict):
            return []
        self.model = data.get("model") or self.model
        self.usage = data.get("usage") or self.usage
        texts = []
        for choice in _list(data.get("choices")):
            delta = choice.get("delta") or {}
            if delta.get("content"):
                texts.append(text_of(delta["content"]))
            for call in _list(delta.get("tool_calls")):
                slot = self.slots.setdefault(call.get("index", len(self.slots)),
                                             {"id": "", "name": "", "arguments": ""})
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                # Some servers repeat the whole name in every fragment, others send it once.
                name = str(function.get("name") or "")
                if name and name != slot["name"]:
                    slot["name"] += name
                slot["arguments"] += tool_call(None, None, function.get("arguments")).arguments
            self.finish = choice.get("finish_reason") or self.finish
        self.parts += texts
        return texts

    def reply(self) -> ModelReply:
        calls = tuple(tool_call(s["id"], s["name"], s["arguments"]) for _, s in sorted(self.slots.items()))
        return ModelReply("".join(self.parts), calls, _finish(self.finish, calls), self.model, _usage(self.usage))


def _call(call: Any) -> ToolCall:
    function = call.get("function") or {}
    return tool_call(call.get("id"), function.get("name"), function.get("arguments"))


def _list(value: Any) -> list[Any]:
    """A list the reply holds (absent is empty); anything else is a malformed reply."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _usage(usage: Any) -> dict[str, int] | None:
    return {k: v for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else None


def _finish(reason: str | None, calls: tuple[ToolCall, ...]) -> str:
    return "tool_calls" if calls else (reason if reason and reason != "tool_calls" else "stop")
