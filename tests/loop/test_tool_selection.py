"""``tool_selection: {search: ...}``: the scripted LLM receives only the tools that fit the conversation (plus the
pinned ones and those whose offer rule matched), and the response says which were offered and why."""

from __future__ import annotations

from fake_llm import Reply
from test_chat import offered, sse, user


def test_the_model_receives_only_the_selected_tools(endpoint, llm, defs):
    ep = endpoint(defs, chat_settings={"tool_selection": {"search": {"k": 2, "always": ["get_time"]}}})
    llm.answer(Reply(tool_calls=[("call_sqrt", "square_root", {"x": 16})]), Reply(content="4"))
    response = ep.post({"model": "default", "messages": [user("What is the square root of 16?")]})
    assert response.status_code == 200, response.text
    sent = offered(llm.requests[0])
    assert "square_root" in sent and "get_time" in sent and len(sent) <= 3
    assert not {"search_stations", "get_lights", "task_form_fill"} & set(sent)
    assert offered(llm.requests[1]) == sent  # the same offer for the whole request
    reasons = {entry["tool"]: entry["why"] for entry in response.json()["tools_offered"]}
    assert reasons["get_time"] == "always" and reasons["square_root"].startswith("search ")
    assert response.json()["tool_executions"][0]["tool"] == "square_root"


def test_the_conversation_so_far_is_searched_and_a_request_may_ask_for_all(endpoint, llm, defs):
    ep = endpoint(defs, chat_settings={"tool_selection": {"search": {"k": 3}}})
    llm.answer(Reply(content="ok"), Reply(content="ok"))
    messages = [user("Find the weather station in Oslo"), {"role": "assistant", "content": "Which one?"},
                user("the one by the harbour")]
    ep.post({"model": "default", "messages": messages})
    assert "search_stations" in offered(llm.requests[0])  # found by the earlier message of the conversation
    everything = ep.post({"model": "default", "messages": [user("hello")], "gateway": {"tool_selection": "all"}})
    assert len(offered(llm.requests[1])) > 5 and "tools_offered" not in everything.json()


def test_streaming_says_what_was_offered(endpoint, llm, defs):
    ep = endpoint(defs, chat_settings={"tool_selection": {"search": {"k": 1}}})
    llm.answer(Reply(content="Two plus three is five."))
    response = ep.post({"model": "default", "stream": True, "messages": [user("Add 2 and 3 please")]})
    said = [event["tools_offered"] for event in sse(response) if isinstance(event, dict) and "tools_offered" in event]
    assert said == [[{"tool": offered(llm.requests[0])[0], "why": said[0][0]["why"]}]]
    assert said[0][0]["tool"] == "sum"


def test_a_wrong_selection_is_refused_at_its_place(endpoint, llm, defs):
    ep = endpoint(defs)
    answer = ep.post({"model": "default", "messages": [user("hi")],
                      "gateway": {"tool_selection": {"search": {"k": 0}}}})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "gateway.tool_selection" and "from 1 to 50" in error["message"]
    assert llm.requests == []
