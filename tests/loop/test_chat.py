"""The chat endpoint's loop against a scripted OpenAI-compatible LLM: what it sends, runs, answers and traces."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fake_llm import Reply, Status, openai_provider

from gateway.settings import ApiKey, hash_key

QUESTION = "What is the square root of 475695037565?"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def offered(sent: Any) -> list[str]:
    return [tool["function"]["name"] for tool in sent.body.get("tools", [])]


def tool_results(sent: Any) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in sent.body["messages"] if m["role"] == "tool"]


def sse(response: httpx.Response) -> list[Any]:
    """The data of every server-sent event, parsed; ``[DONE]`` kept as the string."""
    events = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_square_root_conversation(endpoint, llm, defs):
    """The seed's conversation: the model calls square_root, the gateway runs it and sends 689706.486532… back."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_sqrt", "square_root", {"x": 475695037565})]),
               Reply(content="The square root of 475695037565 is 689706.486532."))
    response = ep.post({"model": "default", "messages": [user(QUESTION)], "gateway": {"toolsets": ["math"]}})
    assert response.status_code == 200
    body = response.json()
    assert len(llm.requests) == 2
    first, second = llm.requests
    assert first.path == "/v1/chat/completions" and first.body["model"] == "fake-gpt"
    assert sorted(offered(first)) == ["square_root", "sum"]
    assert first.body["messages"] == [user(QUESTION)]
    assert second.body["messages"][1]["tool_calls"][0]["id"] == "call_sqrt"
    [(call_id, content)] = tool_results(second)
    assert call_id == "call_sqrt" and content.startswith("689706.486532")
    assert body["choices"][0]["message"] == {"role": "assistant",
                                             "content": "The square root of 475695037565 is 689706.486532."}
    assert body["choices"][0]["finish_reason"] == "stop"
    [execution] = body["tool_executions"]
    assert execution["tool"] == "square_root" and execution["id"] == "call_sqrt"
    assert execution["arguments"] == {"x": 475695037565}
    assert execution["result"] == pytest.approx(689706.486532, abs=1e-6)
    assert execution["is_error"] is False and execution["side"] == "server" and execution["duration_ms"] >= 0
    assert body["usage"]["total_tokens"] == 30  # both calls to the model, summed


def test_api_key_reaches_the_provider_from_secrets(endpoint, llm, defs, monkeypatch):
    """``api_key: {{ secrets.FAKE_LLM_KEY }}`` is resolved from the environment and sent as a bearer token."""
    ep = endpoint(defs)
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-rotated")  # read per call: a rotated key needs no restart
    llm.answer(Reply(content="hi"))
    ep.post({"messages": [user("hello")]})
    assert llm.requests[0].headers["authorization"] == "Bearer sk-rotated"


def test_parallel_calls_run_concurrently_bounded_and_answer_in_call_order(endpoint, llm, defs):
    """Four calls in one round run two at a time (max_parallel_tools: 2) and their results keep the call order."""
    ep = endpoint(defs, chat_settings={"max_parallel_tools": 2})
    calls = [(f"call_{i}", "meet", {"label": f"m{i}"}) for i in range(4)]
    llm.answer(Reply(tool_calls=calls), Reply(content="all met"))
    body = ep.post({"messages": [user("meet")], "gateway": {"toolsets": ["test"]}}).json()
    results = tool_results(llm.requests[1])
    assert [call_id for call_id, _ in results] == ["call_0", "call_1", "call_2", "call_3"]
    # Each call waits for a partner: they only all succeed if they ran concurrently, and never more than 2.
    assert [content for _, content in results] == [f"m{i} met (peak 2)" for i in range(4)]
    assert [e["id"] for e in body["tool_executions"]] == ["call_0", "call_1", "call_2", "call_3"]
    assert not any(e["is_error"] for e in body["tool_executions"])


def test_hallucinated_tool_name_is_answered_as_an_error(endpoint, llm, defs):
    """A call to a tool that is not offered gets an error result naming the close match, and the loop goes on."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_1", "squareroot", {"x": 4})]),
               Reply(tool_calls=[("call_2", "square_root", {"x": 4})]),
               Reply(content="2"))
    body = ep.post({"messages": [user("sqrt 4")], "gateway": {"toolsets": ["math"]}}).json()
    [(call_id, content)] = tool_results(llm.requests[1])
    assert call_id == "call_1"
    assert "Unknown tool 'squareroot'" in content and "Did you mean 'square_root'?" in content
    assert body["choices"][0]["message"]["content"] == "2"
    assert [(e["tool"], e["is_error"]) for e in body["tool_executions"]] == [("squareroot", True), ("square_root", False)]
    assert body["tool_executions"][0]["arguments"] == {"x": 4}


def test_malformed_arguments_are_answered_as_an_error(endpoint, llm, defs):
    """Arguments that are not JSON get an error result saying so; the model's corrected call then runs."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_1", "square_root", '{"x": 16')]),
               Reply(tool_calls=[("call_2", "square_root", '{"x": 16}')]),
               Reply(content="4"))
    body = ep.post({"messages": [user("sqrt 16")], "gateway": {"toolsets": ["math"]}}).json()
    [(_, content)] = tool_results(llm.requests[1])
    assert "Invalid arguments for tool 'square_root': not valid JSON" in content
    first, second = body["tool_executions"]
    assert first["is_error"] and first["arguments"] == '{"x": 16'
    assert second["result"] == 4.0 and not second["is_error"]


def test_arguments_failing_the_schema_and_failing_tools_are_error_results(endpoint, llm, defs):
    """A schema violation and a tool's own ToolError both reach the model as results it can read."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_1", "square_root", {"x": "four"}), ("call_2", "square_root", {"x": -1})]),
               Reply(content="sorry"))
    ep.post({"messages": [user("sqrt")], "gateway": {"toolsets": ["math"]}})
    (_, schema), (_, failure) = tool_results(llm.requests[1])
    assert "at $.x: expected number" in schema
    assert "Cannot take the square root of a negative number" in failure
    assert [m.get("is_error") for m in llm.requests[1].body["messages"] if m["role"] == "tool"] == [None, None]


def test_round_trip_cap_ends_with_one_call_without_tools(endpoint, llm, defs):
    """After max_round_trips rounds of tool calls, one last request without tools gets the user an answer."""
    ep = endpoint(defs, chat_settings={"max_round_trips": 2})
    llm.answer(Reply(tool_calls=[("call_1", "sum", {"a": 1, "b": 2})]),
               Reply(tool_calls=[("call_2", "sum", {"a": 3, "b": 3})]),
               Reply(content="The answer is 6."))
    body = ep.post({"messages": [user("add")], "gateway": {"toolsets": ["math"]}}).json()
    assert len(llm.requests) == 3
    assert "tools" in llm.requests[1].body and "tools" not in llm.requests[2].body
    assert tool_results(llm.requests[2]) == [("call_1", "3.0"), ("call_2", "6.0")]
    assert body["choices"][0]["message"]["content"] == "The answer is 6."
    assert body["choices"][0]["finish_reason"] == "stop"


def test_a_model_that_insists_on_tools_at_the_cap_still_ends_the_turn(endpoint, llm, defs):
    """Tool calls in the final, tool-less answer are not run; the caller gets an explanation instead of a loop."""
    ep = endpoint(defs, chat_settings={"max_round_trips": 1})
    llm.answer(Reply(tool_calls=[("call_1", "sum", {"a": 1, "b": 2})]),
               Reply(tool_calls=[("call_2", "sum", {"a": 3, "b": 3})]))
    body = ep.post({"messages": [user("add")], "gateway": {"toolsets": ["math"]}}).json()
    assert len(llm.requests) == 2 and len(body["tool_executions"]) == 1
    assert "still calling tools after 1 round" in body["choices"][0]["message"]["content"]
    assert body["choices"][0]["finish_reason"] == "stop"


def test_per_tool_call_limit(endpoint, llm, defs):
    """A tool with max_calls: 2 runs twice in a turn; the third call is refused and the tool is no longer offered."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("c1", "roll", {}), ("c2", "roll", {})]),
               Reply(tool_calls=[("c3", "roll", {})]),
               Reply(content="4 and 4"))
    body = ep.post({"messages": [user("roll thrice")], "gateway": {"toolsets": ["test"]}}).json()
    assert "roll" in offered(llm.requests[0]) and "roll" not in offered(llm.requests[1])
    assert [e["is_error"] for e in body["tool_executions"]] == [False, False, True]
    assert "may be called at most 2 time(s) in one turn" in body["tool_executions"][2]["error"]


def test_return_direct_tool_ends_the_loop_with_its_result(endpoint, llm, defs):
    """A return_direct tool's result is the answer: the model is not asked again."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_1", "lookup_order", {"number": 42})]))
    body = ep.post({"messages": [user("Where is order 42?")], "gateway": {"toolsets": ["test"]}}).json()
    assert len(llm.requests) == 1
    assert body["choices"][0]["message"]["content"] == "Order 42: shipped on 2024-05-02."
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["tool_executions"][0]["tool"] == "lookup_order"


def test_offer_rules_follow_the_latest_user_message(endpoint, llm, defs):
    """A tool with an offer rule is offered only when the latest user message mentions or matches it."""
    ep = endpoint(defs)
    llm.answer(Reply(content="a"), Reply(content="b"), Reply(content="c"))
    for text in ("What's the weather like?", "Show my Booking 7 please", "Where is RR123456785PL?"):
        ep.post({"messages": [user(text)], "gateway": {"toolsets": ["test"]}})
    plain, booking, parcel = (set(offered(sent)) for sent in llm.requests)
    assert not plain & {"get_booking_details", "track_parcel"}
    assert "get_booking_details" in booking and "track_parcel" not in booking
    assert "track_parcel" in parcel and "get_booking_details" not in parcel
    assert {"roll", "meet"} <= plain  # tools without rules are offered regardless


def test_allowlist_tags_and_api_key_toolsets_narrow_the_offer(endpoint, llm, defs):
    """The request's allowlist and tags, and the API key's toolsets, each narrow what the model is offered."""
    ep = endpoint(defs, chat_settings={"tools": ["square_root", "sum", "get_time"]})
    llm.answer(Reply(content="a"), Reply(content="b"))
    ep.post({"messages": [user("x")]})
    ep.post({"messages": [user("x")], "gateway": {"tools": ["sum", "get_lights"]}})
    assert sorted(offered(llm.requests[0])) == ["get_time", "square_root", "sum"]
    assert offered(llm.requests[1]) == ["sum"]  # get_lights is outside the settings' allowlist

    keyed = endpoint(defs, api_keys=(ApiKey("mathapp", hash_key("k-math"), ("math",)),))
    llm.answer(Reply(content="c"), Reply(content="d"))
    keyed.post({"messages": [user("x")]}, headers={"Authorization": "Bearer k-math"})
    keyed.post({"messages": [user("x")], "gateway": {"tags": ["langchain4j"], "toolsets": ["math", "time"]}},
               headers={"Authorization": "Bearer k-math"})
    assert sorted(offered(llm.requests[2])) == ["square_root", "sum"]
    assert sorted(offered(llm.requests[3])) == ["square_root", "sum"]
    refused = keyed.post({"messages": [user("x")]})
    assert refused.status_code == 401 and refused.json()["error"]["type"] == "invalid_request_error"


def test_tool_choice_is_passed_through_for_the_first_round_only(endpoint, llm, defs):
    """tool_choice reaches the model; a forced choice is dropped after the first round so the loop can end."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("c1", "sum", {"a": 1, "b": 1})]), Reply(content="2"))
    forced = {"type": "function", "function": {"name": "sum"}}
    ep.post({"messages": [user("1+1")], "tool_choice": forced, "gateway": {"toolsets": ["math"]}})
    assert llm.requests[0].body["tool_choice"] == forced and "tool_choice" not in llm.requests[1].body
    llm.answer(Reply(content="no tools"))
    ep.post({"messages": [user("hi")], "tool_choice": "none", "gateway": {"toolsets": ["math"]}})
    assert llm.requests[2].body["tool_choice"] == "none"
    refused = ep.post({"messages": [user("hi")], "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    assert refused.status_code == 400 and "does not offer" in refused.json()["error"]["message"]


def test_conversation_id_and_user_reach_tools_that_declare_them(endpoint, llm, defs):
    """The X-Conversation-Id header, ``user`` and ``metadata`` are injected into the tool's declared parameters."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_who", "whoami", {})]), Reply(content="ok"),
               Reply(tool_calls=[("call_who2", "whoami", {})]), Reply(content="ok"))
    body = ep.post({"messages": [user("who")], "user": "ala", "metadata": {"tenant": "acme"}},
                   headers={"X-Conversation-Id": "conv-7"}).json()
    assert body["tool_executions"][0]["result"] == {"conversation_id": "conv-7", "user": "ala",
                                                    "tool_call_id": "call_who", "metadata": {"tenant": "acme"}}
    assert llm.requests[0].body["user"] == "ala"  # a standard field: the provider gets it too
    body = ep.post({"messages": [user("who")], "metadata": {"conversation_id": "conv-8"}},
                   headers={"X-User": "ola"}).json()
    assert body["tool_executions"][0]["result"]["conversation_id"] == "conv-8"
    assert body["tool_executions"][0]["result"]["user"] == "ola"


def test_client_tools_are_handed_back_and_the_loop_resumes(endpoint, llm, defs):
    """A client tool called beside a server tool is handed back; the returned result resumes the loop with both."""
    ep = endpoint(defs)
    llm.answer(Reply(content="Filling in.", tool_calls=[("call_sum", "sum", {"a": 2, "b": 3}),
                                                       ("call_fill", "fill_field", {"field": "total", "value": "5"})]))
    question = [user("Put 2+3 into the total field")]
    first = ep.post({"messages": question, "gateway": {"toolsets": ["test", "math"]}}).json()
    message = first["choices"][0]["message"]
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] == "Filling in."
    assert [c["id"] for c in message["tool_calls"]] == ["call_fill"]  # only what the caller must run
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"field": "total", "value": "5"}
    assert [(e["tool"], e["result"]) for e in first["tool_executions"]] == [("sum", 5.0)]
    assert len(llm.requests) == 1

    llm.answer(Reply(content="Done: the total is 5."))
    returned = [*question, message, {"role": "tool", "tool_call_id": "call_fill", "content": '"total set to 5"'}]
    second = ep.post({"messages": returned, "gateway": {"toolsets": ["test", "math"]}}).json()
    assert second["choices"][0]["message"]["content"] == "Done: the total is 5."
    sent = llm.requests[1].body["messages"]
    # The model sees its whole round again: both calls, and both results in call order.
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_sum", "call_fill"]
    assert tool_results(llm.requests[1]) == [("call_sum", "5.0"), ("call_fill", "total set to 5")]
    [received] = second["tool_executions"]
    assert received == {"id": "call_fill", "tool": "fill_field", "arguments": {"field": "total", "value": "5"},
                        "result": "total set to 5", "is_error": False, "side": "client", "duration_ms": None,
                        "round": 1}


def test_client_results_are_checked_and_missing_ones_answered(endpoint, llm, defs):
    """A client result failing the output schema becomes an error; a call left without result gets one."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("c1", "fill_field", {"field": "a", "value": "1"}),
                                 ("c2", "fill_field", {"field": "b", "value": "2"})]))
    question = [user("fill a and b")]
    message = ep.post({"messages": question}).json()["choices"][0]["message"]
    llm.answer(Reply(content="done"))
    body = ep.post({"messages": [*question, message, {"role": "tool", "tool_call_id": "c1", "content": "[1, 2]"}]}).json()
    (_, checked), (_, missing) = tool_results(llm.requests[1])
    assert "does not match its output schema" in checked
    assert missing == "The caller returned no result for this call."
    assert body["tool_executions"][0]["is_error"]
    stray = ep.post({"messages": [*question, message, {"role": "tool", "tool_call_id": "zz", "content": "x"}]})
    assert stray.status_code == 400 and "zz" in stray.json()["error"]["message"]


def test_scope_all_tools_run_in_the_caller_when_asked(endpoint, llm, defs):
    """example-tool (scope all) runs in the gateway by default and is handed back with gateway.side: client."""
    ep = endpoint(defs)
    call = Reply(tool_calls=[("c1", "example-tool", {"exampleParam": "hello"})])
    llm.answer(call, Reply(content="done"), call)
    body = ep.post({"messages": [user("try it")]}).json()
    assert body["tool_executions"][0]["result"] == "hello answered"
    handed = ep.post({"messages": [user("try it")], "gateway": {"side": "client"}}).json()
    assert handed["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "example-tool"
    assert handed["tool_executions"] == []


def test_client_tool_arguments_are_validated_before_handing_back(endpoint, llm, defs):
    """A client call with arguments outside the schema is answered by the gateway, not handed to the caller."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("c1", "fill_field", {"field": "a"})]), Reply(content="oops"))
    body = ep.post({"messages": [user("fill")]}).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "missing required property 'value'" in tool_results(llm.requests[1])[0][1]


def test_caller_declared_functions_are_handed_back(endpoint, llm, defs):
    """Functions in the request's own ``tools`` are offered beside the gateway's and their calls handed back."""
    ep = endpoint(defs)
    mine = {"type": "function", "function": {"name": "open_map", "description": "Opens a map",
                                             "parameters": {"type": "object", "properties": {}}}}
    llm.answer(Reply(tool_calls=[("c1", "open_map", {})]))
    body = ep.post({"messages": [user("map")], "tools": [mine], "gateway": {"toolsets": ["math"]}}).json()
    assert offered(llm.requests[0]) == ["square_root", "sum", "open_map"]
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "open_map"
    clash = {"type": "function", "function": {"name": "sum"}}
    assert ep.post({"messages": [user("x")], "tools": [clash], "gateway": {"toolsets": ["math"]}}).status_code == 400


def test_streaming_sends_text_executions_and_the_end(endpoint, llm, defs):
    """With stream: true the text arrives in chunks, each tool round as a tool_executions chunk, then [DONE]."""
    ep = endpoint(defs)
    llm.answer(Reply(content="Let me compute.", tool_calls=[("call_sqrt", "square_root", {"x": 475695037565})]),
               Reply(content="It is 689706.486532."))
    response = ep.post({"messages": [user(QUESTION)], "stream": True, "stream_options": {"include_usage": True},
                        "gateway": {"toolsets": ["math"]}})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Let me compute.\n\nIt is 689706.486532."
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) > 2  # really streamed
    [executions] = [c["tool_executions"] for c in chunks if "tool_executions" in c]
    assert executions[0]["result"] == pytest.approx(689706.486532, abs=1e-6)
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]] \
        == ["stop"]
    assert chunks[-1]["usage"]["total_tokens"] == 30 and chunks[-1]["choices"] == []
    assert all(sent.body["stream"] is True for sent in llm.requests)
    [(_, content)] = tool_results(llm.requests[1])
    assert content.startswith("689706.486532")


def test_streaming_hands_back_client_tools(endpoint, llm, defs):
    """A streamed response ends with the handed-back tool_calls and finish_reason tool_calls."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("call_fill", "fill_field", {"field": "a", "value": "1"})]))
    chunks = sse(ep.post({"messages": [user("fill")], "stream": True}))[:-1]
    [calls] = [c["choices"][0]["delta"]["tool_calls"] for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert calls == [{"index": 0, "id": "call_fill", "type": "function",
                      "function": {"name": "fill_field", "arguments": '{"field": "a", "value": "1"}'}}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_streaming_return_direct_streams_the_result(endpoint, llm, defs):
    """A return_direct result is streamed as the answer's text."""
    ep = endpoint(defs)
    llm.answer(Reply(tool_calls=[("c1", "lookup_order", {"number": 7})]))
    chunks = sse(ep.post({"messages": [user("order 7?")], "stream": True}))[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Order 7: shipped on 2024-05-02."


def test_provider_failures_are_openai_shaped_errors(endpoint, llm, defs):
    """A provider that refuses gives 502 with its message; when streaming, before any output, the same."""
    ep = endpoint(defs)
    llm.answer(Status(401, message="Incorrect API key provided"))
    response = ep.post({"messages": [user("hi")]})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "provider_error" and "answered 401: Incorrect API key provided" in error["message"]
    llm.answer(Status(400, message="bad things"))
    streamed = ep.post({"messages": [user("hi")], "stream": True})
    assert streamed.status_code == 502 and "bad things" in streamed.json()["error"]["message"]
    assert len(llm.requests) == 2  # 4xx other than 429 are not retried


def test_provider_failure_mid_stream_is_an_error_event(endpoint, llm, defs):
    """When the provider fails after the stream began, the stream ends with an error event, not a broken body."""
    ep = endpoint(defs)
    llm.answer(Reply(content="Computing.", tool_calls=[("c1", "sum", {"a": 1, "b": 1})]), Status(400, message="nope"))
    events = sse(ep.post({"messages": [user("1+1")], "stream": True, "gateway": {"toolsets": ["math"]}}))
    assert "[DONE]" not in events
    assert "nope" in events[-1]["error"]["message"] and events[-1]["error"]["code"] == "provider_error"


def test_retries_honour_retry_after(endpoint, llm, defs):
    """A 429 with Retry-After and a 503 are retried, waiting what Retry-After asks, before the 200."""
    ep = endpoint(defs)
    llm.answer(Status(429, {"Retry-After": "2"}), Status(503), Reply(content="finally"))
    body = ep.post({"messages": [user("hi")]}).json()
    assert body["choices"][0]["message"]["content"] == "finally"
    assert len(llm.requests) == 3
    assert ep.sleeps[0] == 2.0  # what Retry-After asked
    assert 0.75 <= ep.sleeps[1] <= 1.25  # no Retry-After on the 503: the second backoff step, 1 s ± 25 %


def test_with_auth_on_only_a_trusted_key_names_the_user(endpoint, llm, defs):
    """Behind API keys the body's ``user`` and X-User are ignored for an ordinary key (tools and the provider see
    the key's name) and honoured for a key with may_assert_user."""
    ep = endpoint(defs, api_keys=(ApiKey("app", hash_key("k-app")),
                                  ApiKey("web", hash_key("k-web"), may_assert_user=True)))
    seen = []
    for key, body_user, header_user in (("k-app", "ceo", None), ("k-app", None, "ceo"), ("k-web", "ceo", None),
                                        ("k-web", None, "ola"), ("k-web", None, None)):
        llm.answer(Reply(tool_calls=[("call_who", "whoami", {})]), Reply(content="ok"))
        headers = {"Authorization": f"Bearer {key}"} | ({"X-User": header_user} if header_user else {})
        body = ep.post({"messages": [user("who")], **({"user": body_user} if body_user else {})},
                       headers=headers).json()
        seen.append(body["tool_executions"][0]["result"]["user"])
        if body_user:  # the provider's own `user` field carries the effective user, never the asserted one
            assert llm.requests[-1].body["user"] == seen[-1]
    assert seen == ["app", "app", "ceo", "ola", "web"]


def test_a_bug_is_an_openai_shaped_500_naming_a_log_reference_only(endpoint, llm, defs, monkeypatch, caplog):
    """An unexpected failure answers 500 in OpenAI's error shape with a reference that the logged traceback
    carries too, and nothing of the exception."""
    ep = endpoint(defs)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(ep.loop, "turn", broken)
    response = ep.post({"messages": [user("x")]})
    assert response.status_code == 500 and "secret" not in response.text
    error = response.json()["error"]
    assert error["type"] == "server_error" and error["message"].startswith("Internal server error; ref ")
    reference = error["message"].removeprefix("Internal server error; ref ").rstrip(".")
    assert any(reference in record.getMessage() and record.exc_info for record in caplog.records)


def test_a_body_nested_too_deeply_is_a_400(endpoint, llm, defs):
    """JSON nested deeper than the parser goes is a 400 in OpenAI's error shape, not a 500."""
    response = httpx.post(endpoint(defs).url + "/v1/chat/completions", content=b"[" * 200_000, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error" and "nested" in response.json()["error"][
        "message"]
    assert llm.requests == []


@pytest.mark.parametrize("body, message", [
    ({"messages": []}, "'messages' must be a non-empty array"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "needs 'tool_call_id'"),
    ({"messages": [user("x")], "n": 2}, "'n' must be 1"),
    ({"messages": [user("x")], "model": 4}, "'model' must be a string"),
    ({"messages": [user("x")], "gateway": {"toolset": ["x"]}}, "gateway: unknown field(s) toolset"),
    ({"messages": [user("x")], "gateway": {"side": "browser"}}, "gateway.side"),
])
def test_bad_requests_say_what_is_wrong(endpoint, llm, defs, body, message):
    """A malformed request gets 400 in OpenAI's error shape, naming the field."""
    response = endpoint(defs).post(body)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert llm.requests == []


def test_no_provider_configured_is_503(endpoint, defs):
    """Without providers in the settings the endpoint answers 503 saying what to configure."""
    response = endpoint(defs, providers={}).post({"messages": [user("x")]})
    assert response.status_code == 503 and "No LLM provider is configured" in response.json()["error"]["message"]


def test_models_lists_providers_and_model_picks_one(endpoint, llm, defs):
    """/v1/models lists the providers and their models; ``model`` picks one, or overrides its model as
    provider/model."""
    ep = endpoint(defs, providers={"default": openai_provider(llm), "other": openai_provider(llm, model="m2")})
    assert [m["id"] for m in httpx.get(ep.url + "/v1/models").json()["data"]] == ["default", "other", "fake-gpt",
                                                                                "m2"]
    llm.answer(Reply(content="a"), Reply(content="b"), Reply(content="c"))
    for model in ("other", "default/custom-model", None):
        ep.post({"messages": [user("x")], **({"model": model} if model else {})})
    assert [sent.body["model"] for sent in llm.requests] == ["m2", "custom-model", "fake-gpt"]


def test_a_forced_tool_choice_sent_again_with_client_results_is_not_forced_again(endpoint, llm, defs):
    """A caller that resends its forced tool_choice with the client tool's result lets the model answer in text."""
    ep = endpoint(defs)
    forced = {"type": "function", "function": {"name": "fill_field"}}
    llm.answer(Reply(tool_calls=[("call_fill", "fill_field", {"field": "total", "value": "5"})]))
    question = [user("Put 5 into the total field")]
    first = ep.post({"messages": question, "tool_choice": forced, "gateway": {"toolsets": ["test"]}}).json()
    message = first["choices"][0]["message"]
    llm.answer(Reply(content="Done."))
    returned = [*question, message, {"role": "tool", "tool_call_id": "call_fill", "content": '"ok"'}]
    second = ep.post({"messages": returned, "tool_choice": forced, "gateway": {"toolsets": ["test"]}}).json()
    assert llm.requests[0].body["tool_choice"] == forced
    assert "tool_choice" not in llm.requests[1].body
    assert second["choices"][0]["message"]["content"] == "Done."
