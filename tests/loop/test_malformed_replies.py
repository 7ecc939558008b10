"""Replies of odd or broken shape from an LLM server: tolerated variants work, anything else is a 502, never a 500."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

USER = {"role": "user", "content": "1+2?"}
MATH = {"toolsets": ["math"]}


class RawLLM:
    """An LLM server answering exactly the JSON bodies (or SSE event lists) it was given, in order."""

    def __init__(self) -> None:
        self.url = ""
        self.script: deque[Any] = deque()
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: Request) -> Response:
        self.requests.append(await request.json())
        item = self.script.popleft()
        if isinstance(item, list):  # server-sent events
            text = "".join(f"data: {json.dumps(event)}\n\n" for event in item) + "data: [DONE]\n\n"
            return Response(text, media_type="text/event-stream")
        return JSONResponse(item)


@pytest.fixture(scope="session")
def _raw_server(servers) -> RawLLM:
    raw = RawLLM()
    raw.url = servers.start(Starlette(routes=[Route("/v1/chat/completions", raw.handle, methods=["POST"]),
                                              Route("/v1/messages", raw.handle, methods=["POST"])]))
    return raw


@pytest.fixture
def raw(_raw_server: RawLLM) -> RawLLM:
    _raw_server.script.clear()
    _raw_server.requests.clear()
    return _raw_server


def openai(raw: RawLLM) -> dict[str, Any]:
    return {"default": {"kind": "openai", "base_url": raw.url + "/v1", "model": "raw", "max_retries": 0}}


def anthropic(raw: RawLLM) -> dict[str, Any]:
    return {"default": {"kind": "anthropic", "base_url": raw.url, "model": "raw", "max_retries": 0}}


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {"model": "raw", "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                         "finish_reason": "stop"}]}


def call(name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_openai_arguments_as_an_object_are_accepted(endpoint, raw, defs):
    """Tool call arguments sent as a JSON object instead of JSON text are read as those arguments."""
    ep = endpoint(defs, providers=openai(raw))
    raw.script.extend([completion({"content": None, "tool_calls": [call("sum", {"a": 1, "b": 2})]}),
                       completion({"content": "3"})])
    response = ep.post({"messages": [USER], "gateway": MATH})
    assert response.status_code == 200, response.text
    [execution] = response.json()["tool_executions"]
    assert execution["arguments"] == {"a": 1, "b": 2} and execution["result"] == 3


def test_openai_null_tool_name_is_an_unknown_tool(endpoint, raw, defs):
    """A tool call whose name is null is answered to the model as an unknown tool, and the turn goes on."""
    ep = endpoint(defs, providers=openai(raw))
    raw.script.extend([completion({"content": None, "tool_calls": [call(None, "{}")]}),
                       completion({"content": "sorry"})])
    response = ep.post({"messages": [USER], "gateway": MATH})
    assert response.status_code == 200, response.text
    [result] = [m for m in raw.requests[1]["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("Unknown tool ''.")


@pytest.mark.parametrize("reply", [
    completion({"content": None, "tool_calls": [{"id": "c1", "function": "sum"}]}),
    completion({"content": [{"type": "text", "text": 7}]}),
    completion({"content": "ok", "tool_calls": 5}),
])
def test_openai_malformed_replies_are_502(endpoint, raw, defs, reply):
    """A Chat Completions reply of a shape no client can read is a provider error (502) naming the provider."""
    ep = endpoint(defs, providers=openai(raw))
    raw.script.append(reply)
    response = ep.post({"messages": [USER], "gateway": MATH})
    assert response.status_code == 502, response.text
    assert "LLM provider 'default' answered with a malformed reply" in response.json()["error"]["message"]


def test_openai_malformed_stream_is_502(endpoint, raw, defs):
    """A streamed chunk of a shape no client can read is a provider error (502) before any output."""
    ep = endpoint(defs, providers=openai(raw))
    raw.script.append([{"model": "raw", "choices": ["not a choice"]}])
    response = ep.post({"messages": [USER], "gateway": MATH, "stream": True})
    assert response.status_code == 502, response.text
    assert "malformed reply" in response.json()["error"]["message"]


def test_anthropic_tool_use_without_id_gets_one(endpoint, raw, defs):
    """An Anthropic tool_use block without an id is run under an id of the gateway's own."""
    ep = endpoint(defs, providers=anthropic(raw))
    raw.script.extend([{"model": "raw", "stop_reason": "tool_use",
                        "content": [{"type": "tool_use", "name": "sum", "input": {"a": 1, "b": 2}}]},
                       {"model": "raw", "stop_reason": "end_turn", "content": [{"type": "text", "text": "3"}]}])
    response = ep.post({"messages": [USER], "gateway": MATH})
    assert response.status_code == 200, response.text
    [execution] = response.json()["tool_executions"]
    assert execution["result"] == 3 and execution["id"].startswith("call_")


@pytest.mark.parametrize("content", [["a string, not a block"], [{"type": "text", "text": None}],
                                     [{"type": "tool_use", "id": "t1", "name": "sum", "input": "1, 2"}]])
def test_anthropic_malformed_blocks_are_502(endpoint, raw, defs, content):
    """Anthropic content blocks of a shape no client can read are a provider error (502), not a 500."""
    ep = endpoint(defs, providers=anthropic(raw))
    raw.script.append({"model": "raw", "stop_reason": "end_turn", "content": content})
    response = ep.post({"messages": [USER], "gateway": MATH})
    assert response.status_code == 502, response.text
    assert "LLM provider 'default' answered with a malformed reply" in response.json()["error"]["message"]


def test_anthropic_malformed_stream_is_502(endpoint, raw, defs):
    """A streamed content block that is not an object is a provider error (502), not a 500."""
    ep = endpoint(defs, providers=anthropic(raw))
    raw.script.append([{"type": "message_start", "message": {"model": "raw"}},
                       {"type": "content_block_start", "index": 0, "content_block": "tool_use"}])
    response = ep.post({"messages": [USER], "gateway": MATH, "stream": True})
    assert response.status_code == 502, response.text
    assert "malformed reply" in response.json()["error"]["message"]
