"""Random request bodies to ``POST /tools/{id}/call`` and ``POST /v1/chat/completions``.

Whatever the bytes, the answer is a documented one — a result (200), a refused request (400) or one too large
(413) — in its documented shape, never a 500; and the keep-alive connection that carried it still serves the
next request. The hostile bodies are the inputs known to have crashed the gateway (lone surrogates, duplicate
keys, deep nesting); chat bodies carry fields of every type (a role that was an object once answered 500).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from fuzz_support import FuzzServer, fuzz, json_values
from hypothesis import example, given
from hypothesis import strategies as st
from support import EXAMPLES, catalog_for

from gateway.loop.request import ROLES

TOOL_IDS = sorted(catalog_for(EXAMPLES).tools)
REST_ANSWERS = {200, 400, 413}
CHAT_ANSWERS = {200, 400, 404, 413}  # 404: no such model


def encoded(values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return values.map(lambda value: json.dumps(value).encode())


def truncated(bodies: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.tuples(bodies, st.integers(min_value=0)).map(lambda pair: pair[0][: pair[1] % (len(pair[0]) + 1)])


plain_bodies = st.one_of(encoded(json_values), truncated(encoded(json_values)), st.binary(max_size=40),
                         encoded(st.text()), st.just(b""), st.just(b"  \n"))
# Text holding lone surrogates (valid JSON escapes, unencodable as UTF-8), duplicate keys, deep nesting.
surrogate_text = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3)
duplicate_keys = st.tuples(st.text(max_size=5), json_values, json_values).map(
    lambda kv: f"{{{json.dumps(kv[0])}: {json.dumps(kv[1])}, {json.dumps(kv[0])}: {json.dumps(kv[2])}}}".encode())
deep = st.tuples(st.integers(min_value=100, max_value=5000), st.sampled_from([("[", "]"), ('{"a":', "}")])).map(
    lambda n_pair: (n_pair[1][0] * n_pair[0] + "1" + n_pair[1][1] * n_pair[0]).encode())
hostile_bodies = st.one_of(encoded(st.dictionaries(st.text(max_size=5), surrogate_text, min_size=1, max_size=2)),
                           duplicate_keys, deep, st.just(b'{"s": "\\ud800"}'))


def check_rest_answer(server: FuzzServer, answer: httpx.Response) -> None:
    assert answer.status_code in REST_ANSWERS, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    if answer.status_code == 200:
        assert isinstance(body["is_error"], bool) and isinstance(body["text"], str), body
    else:
        assert body == {"error": body["error"], "status": answer.status_code}, body
    assert server.client.get("/healthz").status_code == 200  # the connection (kept alive) still serves


@fuzz(60)
@given(tool_id=st.sampled_from(TOOL_IDS), body=plain_bodies)
def test_any_body_to_a_tool_call_is_a_documented_answer(fuzz_server: FuzzServer, tool_id: str, body: bytes) -> None:
    """Random bytes and JSON to POST /tools/{id}/call: 200, 400 or 413 in the documented shape; never a 500."""
    check_rest_answer(fuzz_server, fuzz_server.call(tool_id, body))


@fuzz(30)
@given(tool_id=st.sampled_from(TOOL_IDS), body=hostile_bodies)
def test_hostile_body_to_a_tool_call_is_a_documented_answer(fuzz_server: FuzzServer, tool_id: str, body: bytes
                                                            ) -> None:
    """Lone surrogates, duplicate keys and deep nesting are 400s (or results), never 500s or argument crashes."""
    answer = fuzz_server.call(tool_id, body)
    check_rest_answer(fuzz_server, answer)
    if answer.status_code == 200:
        assert "internal error" not in (answer.json().get("error") or ""), answer.text


def chat(server: FuzzServer, body: bytes) -> httpx.Response:
    return server.client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})


def check_chat_answer(server: FuzzServer, answer: httpx.Response) -> None:
    assert answer.status_code in CHAT_ANSWERS, answer.text
    if answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream"):
        assert answer.text.rstrip().endswith("data: [DONE]") or '"error"' in answer.text, answer.text
        assert "Internal server error" not in answer.text, answer.text  # a bug after the stream started
    else:
        assert answer.headers["content-type"] == "application/json"
        body = answer.json()
        assert body["object"] == "chat.completion" if answer.status_code == 200 else set(body["error"]) == {
            "message", "type", "param", "code"}, body
    assert server.client.get("/healthz").status_code == 200


@fuzz(40)
@given(body=plain_bodies)
def test_any_body_to_chat_is_a_documented_answer(fuzz_server: FuzzServer, body: bytes) -> None:
    """Random bytes and JSON to the chat endpoint: a completion, or a 400/413 in OpenAI's error shape; never a 500."""
    check_chat_answer(fuzz_server, chat(fuzz_server, body))


# Content parts as OpenAI spells them, with values of any type (a text part's text that was a number answered 500).
content_parts = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]) | json_values},
                                               optional={"text": st.text() | json_values}), max_size=3)
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(sorted(ROLES)) | json_values},
                                          optional={"content": json_values | content_parts,
                                                    "tool_call_id": json_values,
                                                    "tool_calls": json_values}), min_size=1, max_size=3)
chat_bodies = st.fixed_dictionaries({"messages": messages}, optional={
    "model": json_values, "stream": st.booleans() | json_values, "stream_options": json_values, "n": json_values,
    "tools": json_values, "tool_choice": json_values, "gateway": json_values, "metadata": json_values,
    "user": json_values})


@fuzz(60)
@given(body=chat_bodies)
@example(body={"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]})
def test_chat_shaped_bodies_are_a_documented_answer(fuzz_server: FuzzServer, body: dict[str, Any]) -> None:
    """Chat bodies with fields of any type: a completion or a 400 naming the field; never a 500."""
    check_chat_answer(fuzz_server, chat(fuzz_server, json.dumps(body).encode()))
