"""The loop over an Anthropic Messages provider: translation both ways, JSON and streamed."""

from __future__ import annotations

import json

import pytest
from fake_llm import Reply, anthropic_provider

QUESTION = "What is the square root of 475695037565?"


@pytest.fixture
def claude(endpoint, llm, defs):
    return endpoint(defs, providers={"claude": anthropic_provider(llm)})


@pytest.mark.parametrize("stream", [False, True])
def test_square_root_conversation_over_anthropic(claude, llm, stream):
    """The seed's conversation through /v1/messages: tools as input_schema, the result as a tool_result block."""
    llm.answer(Reply(content="Computing.", tool_calls=[("toolu_1", "square_root", {"x": 475695037565})]),
               Reply(content="It is 689706.486532."))
    response = claude.post({"messages": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": QUESTION}],
                            "max_tokens": 300, "temperature": 0.2, "stream": stream,
                            "gateway": {"toolsets": ["math"]}})
    assert response.status_code == 200
    first, second = llm.requests
    assert first.path == "/v1/messages"
    assert first.headers["anthropic-version"] == "2023-06-01" and first.headers["x-api-key"].startswith("sk-test-")
    assert first.body["system"] == "Be exact."
    assert (first.body["max_tokens"], first.body["temperature"], first.body.get("stream", False)) == (300, 0.2, stream)
    assert {t["name"]: sorted(t["input_schema"]["properties"]) for t in first.body["tools"]} == {
        "square_root": ["x"], "sum": ["a", "b"]}
    assert first.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    assistant, results = second.body["messages"][1:]
    assert assistant == {"role": "assistant", "content": [
        {"type": "text", "text": "Computing."},
        {"type": "tool_use", "id": "toolu_1", "name": "square_root", "input": {"x": 475695037565}}]}
    [block] = results["content"]
    assert results["role"] == "user" and block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1"
    assert block["content"].startswith("689706.486532") and "is_error" not in block
    if stream:
        text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in response.text.splitlines()
                       if line.startswith("data: {") and json.loads(line[6:])["choices"])
    else:
        text = response.json()["choices"][0]["message"]["content"]
        assert response.json()["usage"] == {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    assert text == "Computing.\n\nIt is 689706.486532."


def test_parallel_calls_and_errors_become_one_user_turn(claude, llm):
    """Parallel tool_use blocks are answered by one user turn of tool_result blocks, errors flagged is_error."""
    llm.answer(Reply(tool_calls=[("toolu_a", "square_root", {"x": 9}), ("toolu_b", "squareroot", {"x": 4})]),
               Reply(content="3, and I could not do the other."))
    claude.post({"messages": [{"role": "user", "content": "sqrt 9 and 4"}], "gateway": {"toolsets": ["math"]}})
    turns = llm.requests[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    blocks = turns[2]["content"]
    assert [(b["tool_use_id"], b.get("is_error", False)) for b in blocks] == [("toolu_a", False), ("toolu_b", True)]
    assert blocks[0]["content"] == "3.0" and "Unknown tool 'squareroot'" in blocks[1]["content"]


def test_tool_choice_and_the_final_call_in_anthropic_terms(endpoint, llm, defs):
    """tool_choice maps to Anthropic's; at the round cap the tools stay declared with tool_choice none."""
    ep = endpoint(defs, providers={"claude": anthropic_provider(llm)}, chat_settings={"max_round_trips": 1})
    llm.answer(Reply(tool_calls=[("toolu_1", "sum", {"a": 1, "b": 2})]), Reply(content="3"))
    ep.post({"messages": [{"role": "user", "content": "1+2"}], "tool_choice": "required", "parallel_tool_calls": False,
             "gateway": {"toolsets": ["math"]}})
    first, final = llm.requests
    assert first.body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert final.body["tool_choice"] == {"type": "none"} and len(final.body["tools"]) == 2
    assert "parallel_tool_calls" not in first.body  # no Anthropic equivalent beyond tool_choice


def test_client_tools_resume_over_anthropic(claude, llm):
    """A handed-back call resumes over Anthropic with the caller's result as a tool_result."""
    llm.answer(Reply(tool_calls=[("toolu_f", "fill_field", {"field": "a", "value": "1"})]))
    question = [{"role": "user", "content": "fill a"}]
    message = claude.post({"messages": question}).json()["choices"][0]["message"]
    assert message["tool_calls"][0]["id"] == "toolu_f"
    llm.answer(Reply(content="done"))
    claude.post({"messages": [*question, message, {"role": "tool", "tool_call_id": "toolu_f", "content": "ok",
                                                   "is_error": True}]})
    block = llm.requests[1].body["messages"][2]["content"][0]
    assert block == {"type": "tool_result", "tool_use_id": "toolu_f", "content": "ok", "is_error": True}
