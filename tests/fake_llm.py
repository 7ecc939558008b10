"""A scripted LLM speaking OpenAI Chat Completions and Anthropic Messages, and uvicorn servers in threads.

``FakeLLM`` answers at ``/v1/chat/completions`` (OpenAI wire format) and ``/v1/messages`` (Anthropic), JSON or
SSE as asked. A test scripts what it answers (``Reply``, ``Status``) and reads back what the gateway sent it
(``requests``).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from support import ServerThread, start_server


@dataclass
class Reply:
    """One scripted answer: text and/or tool calls as (id, name, arguments: JSON text or a value to encode)."""

    content: str = ""
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)

    def calls(self) -> list[tuple[str, str, str]]:
        return [(i, n, a if isinstance(a, str) else json.dumps(a)) for i, n, a in self.tool_calls]


@dataclass
class Status:
    """A scripted failure: an HTTP status with headers and an error body (optionally after a delay)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "scripted failure"
    delay_s: float = 0.0


@dataclass
class Sent:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]


class FakeLLM:
    def __init__(self) -> None:
        self.url = ""
        self.script: deque[Reply | Status] = deque()
        self.requests: list[Sent] = []

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def openai_app(self) -> Starlette:
        """This LLM's OpenAI endpoint (``/v1/chat/completions``) as an app to serve (``Servers.start``)."""
        return Starlette(routes=[Route("/v1/chat/completions", self.handle, methods=["POST"])])

    def answer(self, *items: Reply | Status) -> None:
        self.script.extend(items)

    def reset(self) -> None:
        self.script.clear()
        self.requests.clear()

    async def handle(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Sent(request.url.path, dict(request.query_params), dict(request.headers), body))
        if not self.script:
            return JSONResponse({"error": {"message": "the fake LLM has no scripted answer left"}}, 500)
        item = self.script.popleft()
        if isinstance(item, Status):
            await asyncio.sleep(item.delay_s)
            return JSONResponse({"error": {"message": item.message, "type": "scripted"}}, item.status, item.headers)
        anthropic = request.url.path == "/v1/messages"
        model = body.get("model", "fake")
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = anthropic_events(item, model) if anthropic else openai_chunks(item, model, usage)
            return StreamingResponse(_sse(events), media_type="text/event-stream")
        return JSONResponse(anthropic_message(item, model) if anthropic else openai_completion(item, model))


def openai_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in reply.calls()]
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def openai_chunks(reply: Reply, model: str, usage: bool) -> Iterator[tuple[str | None, dict[str, Any]]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.content):
        yield chunk({"content": piece})
    for index, (call_id, name, arguments) in enumerate(reply.calls()):
        yield chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(arguments):  # arguments arrive in fragments, as from OpenAI
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if usage:
        yield None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in reply.calls()]
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def anthropic_events(reply: Reply, model: str) -> Iterator[tuple[str | None, dict[str, Any]]]:
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}
    index = 0
    if reply.content:
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}
        yield "ping", {"type": "ping"}
        for piece in _pieces(reply.content):
            yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for offset, (call_id, name, arguments) in enumerate(reply.calls()):
        yield "content_block_start", {"type": "content_block_start", "index": index + offset,
                                      "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}
        for piece in _pieces(arguments):
            yield "content_block_delta", {"type": "content_block_delta", "index": index + offset,
                                          "delta": {"type": "input_json_delta", "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index + offset}
    yield "message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


async def _sse(events: Iterator[tuple[str | None, dict[str, Any]]]) -> AsyncIterator[bytes]:
    for name, data in events:
        yield (f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(data).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class Servers:
    """ASGI apps served in threads (``support.start_server``), by base URL."""

    def __init__(self) -> None:
        self.running: dict[str, ServerThread] = {}

    def start(self, app: Starlette, lifespan: str = "off") -> str:
        running = start_server(app, lifespan=lifespan)
        self.running[running.url] = running
        return running.url

    def stop(self, urls: list[str]) -> None:
        for url in urls:
            self.running.pop(url).stop()


def openai_provider(llm: FakeLLM, **extra: Any) -> dict[str, Any]:
    return {"kind": "openai", "base_url": llm.openai_url, "model": "fake-gpt", "api_key": "{{ secrets.FAKE_LLM_KEY }}",
            "max_retries": 2, **extra}


def anthropic_provider(llm: FakeLLM, **extra: Any) -> dict[str, Any]:
    return {"kind": "anthropic", "base_url": llm.url, "model": "fake-claude", "api_key": "{{ secrets.FAKE_LLM_KEY }}",
            **extra}
