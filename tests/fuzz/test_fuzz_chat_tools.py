"""Tool calls an LLM makes, fuzzed: any tool name and any arguments text, run by the chat loop.

What a model writes is remote input like a request body: arguments drawn from the tool's schema, any JSON,
or text that is no JSON at all, for shipped tools and for names no tool has. The chat endpoint answers 200
with the outcome as a tool execution (an error one when the call could not run) or hands a browser tool back
to the caller; never a 500, and the stream, when asked for, ends properly.
"""

from __future__ import annotations

import json
from typing import Any

from fake_llm import FakeLLM, Reply
from fuzz_support import FuzzServer, fuzz, json_values
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from support import EXAMPLES, catalog_for

SCHEMAS = {tool.id: tool.input_schema for tool in catalog_for(EXAMPLES).tools.values()}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, str]:
    """A tool name (shipped or not) and the arguments text a model might write for it."""
    tool_id = draw(st.sampled_from(sorted(SCHEMAS)) | st.text(min_size=1, max_size=12))
    valid = from_schema(SCHEMAS[tool_id]).map(json.dumps) if tool_id in SCHEMAS else st.nothing()
    arguments = draw(valid | json_values.map(json.dumps) | st.text(max_size=20))
    return tool_id, arguments


def check_completion(body: dict[str, Any], tool_id: str) -> None:
    choice = body["choices"][0]
    if choice["finish_reason"] == "tool_calls":  # a browser tool, handed back to the caller to run
        assert choice["message"]["tool_calls"][0]["function"]["name"] == tool_id, body
        return
    assert choice["finish_reason"] == "stop" and choice["message"]["content"] == "done", body
    executed = body["tool_executions"]
    assert len(executed) == 1 and executed[0]["tool"] == tool_id and isinstance(executed[0]["is_error"], bool), body


@fuzz(40)
@given(call=tool_calls(), stream=st.booleans())
def test_any_tool_call_a_model_makes_is_run_or_refused_as_a_result(fuzz_server: FuzzServer, always_llm: FakeLLM,
                                                                   call: tuple[str, str], stream: bool) -> None:
    """A model's tool call with any name and any arguments: 200, one execution (or a hand-back); never a 500."""
    tool_id, arguments = call
    always_llm.script.clear()
    always_llm.answer(Reply(tool_calls=[("call_1", tool_id, arguments)]), Reply("done"))
    answer = fuzz_server.client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "go"}], "stream": stream})
    assert answer.status_code == 200, answer.text
    if not stream:
        check_completion(answer.json(), tool_id)
        return
    # Only CR and LF end an event's line: str.splitlines would also split at a U+2028 inside a JSON string.
    events = [line.removeprefix("data: ") for line in answer.text.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and not any('"error"' in event[:10] for event in events), answer.text
    executions = [e for event in events[:-1] for e in json.loads(event).get("tool_executions", [])]
    assert all(e["tool"] == tool_id and isinstance(e["is_error"], bool) for e in executions), executions
