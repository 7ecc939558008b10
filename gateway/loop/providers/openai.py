"""An OpenAI-compatible Chat Completions client (OpenAI, Azure, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter).

Compatible servers differ in small ways this client absorbs: tool calls without ids get one, a reply with tool
calls is treated as such whatever its ``finish_reason`` says, and streamed tool calls may arrive whole or in
fragments.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .base import HttpProvider, ModelReply, ModelRequest, ProviderError, ToolCall, new_call_id, text_of

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
        data = await self.post_json("/chat/completions", self.body(request, stream=False))
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
            raise ProviderError(f"LLM provider '{self.name}' answered without a message (no choices[0].message).")
        message = choices[0]["message"]
        calls = tuple(
            ToolCall(call.get("id") or new_call_id(), (call.get("function") or {}).get("name", ""),
                     (call.get("function") or {}).get("arguments") or "")
            for call in message.get("tool_calls") or [] if isinstance(call, dict)
        )
        return ModelReply(text_of(message.get("content")), calls, _finish(choices[0].get("finish_reason"), calls),
                          data.get("model") or request.model, data.get("usage"))

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]:
        """Text as it arrives, then the whole reply."""
        parts: list[str] = []
        slots: dict[int, dict[str, str]] = {}
        finish, model, usage = None, request.model, None
        async for _, data in self.events("/chat/completions", self.body(request, stream=True)):
            if not isinstance(data, dict):
                continue
            if data.get("error"):
                raise self.stream_error(data)
            model = data.get("model") or model
            usage = data.get("usage") or usage
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    parts.append(delta["content"])
                    yield delta["content"]
                for call in delta.get("tool_calls") or []:
                    slot = slots.setdefault(call.get("index", len(slots)), {"id": "", "name": "", "arguments": ""})
                    function = call.get("function") or {}
                    slot["id"] = call.get("id") or slot["id"]
                    # Some servers repeat the whole name in every fragment, others send it once.
                    if function.get("name") and function["name"] != slot["name"]:
                        slot["name"] += function["name"]
                    slot["arguments"] += function.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        calls = tuple(ToolCall(s["id"] or new_call_id(), s["name"], s["arguments"]) for _, s in sorted(slots.items()))
        yield ModelReply("".join(parts), calls, _finish(finish, calls), model, usage)


def _finish(reason: str | None, calls: tuple[ToolCall, ...]) -> str:
    return "tool_calls" if calls else (reason if reason and reason != "tool_calls" else "stop")
