"""The chat endpoint against hostile input: bad text in the request or in a tool's result, duplicate keys, a
client that leaves mid-body — 400s and readable results, never a 500."""

from __future__ import annotations

import logging
import socket
import time

import httpx
import pytest
from fake_llm import Reply

SURROGATE_TOOLS = {
    "python/surrogate_tools.py": '''
        def bad_text() -> str:
            return "bad \\ud800 str"
        ''',
    "surrogate.yaml": '''
        tools:
          - {id: bad_text, name: Bad text, user_description: u, ai_description: a,
             binding: {python: "surrogate_tools:bad_text"}}
        ''',
}


@pytest.fixture
def ep(endpoint, write_definitions):
    return endpoint(write_definitions(SURROGATE_TOOLS, "surrogate-defs"))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_tool_result_with_a_lone_surrogate_reaches_the_model_and_the_caller(ep, llm, stream):
    """A tool returning a lone surrogate gives the model and the caller U+FFFD in its place, not a 500."""
    llm.answer(Reply(tool_calls=[("call_1", "bad_text", {})]), Reply(content="done"))
    response = ep.post({"model": "default", "messages": [{"role": "user", "content": "go"}], "stream": stream})
    assert response.status_code == 200, response.text
    assert "Internal server error" not in response.text
    [tool_message] = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_message["content"] == "bad \ufffd str"
    if not stream:
        assert response.json()["tool_executions"][0]["result"] == "bad \ufffd str"


@pytest.mark.parametrize(("body", "said"), [
    (b'{"model": "default", "model": "other", "messages": []}', "duplicate key 'model'"),
    (b'{"model": "default", "messages": [{"role": "user", "content": "\\udc00"}]}', "$.messages[0].content"),
    (b'{"model": "default", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
     "messages[0].content[0].text"),
])
def test_bad_request_bodies_are_400s_naming_the_problem(ep, llm, body, said):
    """A duplicate key, a lone surrogate or a text part that is not text in a chat request is a 400 in OpenAI's
    error shape, saying which."""
    response = httpx.post(ep.url + "/v1/chat/completions", content=body, timeout=10)
    assert response.status_code == 400
    assert said in response.json()["error"]["message"]
    assert llm.requests == []


def test_a_client_leaving_mid_body_leaves_no_error_in_the_log(ep, caplog):
    """A chat request whose client closes after 10 of 1000 body bytes logs nothing above debug."""
    port = int(ep.url.rsplit(":", 1)[1])
    with caplog.at_level(logging.DEBUG):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n" + b'{"model": ')
        assert httpx.get(ep.url + "/v1/models", timeout=10).status_code == 200  # still serving
        deadline = time.monotonic() + 3  # the server notices the disconnect on its own time: wait for its line
        while not any(r.name == "gateway.server" for r in caplog.records) and time.monotonic() < deadline:
            time.sleep(0.02)
    loud = [r for r in caplog.records if r.levelno > logging.DEBUG and r.name.startswith(("gateway", "uvicorn"))]
    assert loud == [], [r.getMessage() for r in loud]
    assert not any(r.exc_info for r in caplog.records)


def test_a_caller_result_nested_too_deep_to_parse_is_kept_as_text(endpoint, defs, llm):
    """A handed-back tool result nested deeper than JSON parsing recurses is a result (its text), not a 500."""
    ep = endpoint(defs)
    llm.answer(Reply(content="done"))
    deep = "[" * 5000 + "]" * 5000
    call = {"id": "c1", "type": "function", "function": {"name": "fill_field", "arguments": "{}"}}
    response = ep.post({"model": "default", "messages": [
        {"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": deep}]})
    assert response.status_code == 200, response.text
