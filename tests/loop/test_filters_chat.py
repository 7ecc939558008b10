"""Invocation filters in the chat loop: what the (fake) LLM is sent back is what the filters made of each call."""

from __future__ import annotations

import json

import pytest
from fake_llm import Reply
from filter_tools import SETTINGS_FILTERS, surfaces_dir

ARGUMENTS = {"text": "alice@example.com hi"}


@pytest.fixture(scope="module")
def filter_defs(tmp_path_factory: pytest.TempPathFactory):
    return surfaces_dir(tmp_path_factory.mktemp("chat-filters"))


def test_the_llm_receives_what_the_filters_made(endpoint, llm, filter_defs) -> None:
    """Changed arguments, a refusal, a failing filter (an error with a reference, the turn goes on), the attached
    schema, and the settings filter's redaction all reach the model as tool results."""
    ep = endpoint(filter_defs, filters=SETTINGS_FILTERS)
    calls = [(f"call_{name}", name, ARGUMENTS) for name in ("shouted", "refused", "crashing", "schema", "surfaced")]
    llm.answer(Reply(tool_calls=calls), Reply(content="done"))
    response = ep.post({"model": "default", "messages": [{"role": "user", "content": "go"}]})
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "done"
    results = {m["tool_call_id"]: m["content"] for m in llm.requests[1].body["messages"] if m["role"] == "tool"}
    assert json.loads(results["call_shouted"]) == {"echo": "ALICE@EXAMPLE.COM HI", "secret": "key-1234 of [redacted]"}
    assert "not today" in results["call_refused"]
    assert json.loads(results["call_surfaced"])["echo"] == "chat"
    assert "myfilters:crash" in results["call_crashing"] and "ref " in results["call_crashing"]
    wrapped = json.loads(results["call_schema"])
    assert wrapped["value"] == {"echo": "[redacted] hi", "secret": "key-1234 of [redacted]"}
    assert wrapped["schema"]["properties"]["echo"] == {"type": "string"}


def test_return_schema_result_is_what_the_llm_receives(endpoint, llm, filter_defs) -> None:
    """With ``return_schema: result`` the model is sent each result as {value, schema} (here the schema derived
    from ``-> dict``); the tool execution the caller gets keeps the plain value."""
    ep = endpoint(filter_defs, return_schema="result")
    llm.answer(Reply(tool_calls=[("call_1", "answered", ARGUMENTS)]), Reply(content="done"))
    response = ep.post({"model": "default", "messages": [{"role": "user", "content": "go"}]})
    [sent] = [m["content"] for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert json.loads(sent) == {"value": {"echo": "from the filter", "secret": ""}, "schema": {"type": "object"}}
    assert response.json()["tool_executions"][0]["result"] == {"echo": "from the filter", "secret": ""}


def test_a_client_tool_result_handed_back_passes_through_the_filters(endpoint, llm, defs) -> None:
    """A browser tool the chat loop handed to its caller: the result the caller sends back passes out through the
    filters (here the settings' redact) before the model reads it and before it is traced."""
    ep = endpoint(defs, filters=({"use": "redact", "with": {"literals": ["alice@example.com"]}},))
    llm.answer(Reply(tool_calls=[("c1", "fill_field", {"field": "to", "value": "alice@example.com"})]))
    question = [{"role": "user", "content": "fill in the address"}]
    message = ep.post({"messages": question}).json()["choices"][0]["message"]
    llm.answer(Reply(content="done"))
    given = {"role": "tool", "tool_call_id": "c1", "content": '"to set to alice@example.com"'}
    body = ep.post({"messages": [*question, message, given]}).json()

    [sent] = [m["content"] for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert sent == "to set to [redacted]"
    assert body["tool_executions"][0]["result"] == "to set to [redacted]"
