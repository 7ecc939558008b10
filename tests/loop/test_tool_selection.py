"""``tool_selection: {search: ...}``: the scripted LLM receives only the tools that fit the conversation (plus the
pinned ones and those whose offer rule matched), and the response says which were offered and why."""

from __future__ import annotations

import uuid

import pytest
from fake_llm import Reply, openai_provider
from test_chat import offered, sse, user

from gateway.loop import ChatLoop, load_loop_config
from gateway.loop.request import parse_chat_request
from gateway.runtime.gateway import Gateway
from gateway.search import bm25
from gateway.settings import Settings


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


def test_only_the_toolsets_left_to_search_are_searched(endpoint, llm, defs):
    """search.toolsets: the weather toolset's tools are ranked (the best k offered), every other tool the request
    would offer is offered whole, said so in tools_offered."""
    ep = endpoint(defs, chat_settings={"toolsets": ["weather", "math"],
                                       "tool_selection": {"search": {"k": 1, "toolsets": ["weather"]}}})
    llm.answer(Reply(content="ok"))
    response = ep.post({"model": "default", "messages": [user("Find the weather station in Oslo")]})
    assert response.status_code == 200, response.text
    reasons = {entry["tool"]: entry["why"] for entry in response.json()["tools_offered"]}
    assert reasons.pop("search_stations").startswith("search ")
    assert reasons and set(reasons.values()) == {"not searched"}
    assert {"sum", "square_root"} <= set(reasons) and not {"get_station", "add_reading"} & set(reasons)
    assert set(offered(llm.requests[0])) == {"search_stations", *reasons}


@pytest.mark.parametrize(("selection", "words"), [
    ({"search": {"k": 0}}, "from 1 to 50"),
    ({"search": {"k": 3, "toolsets": "weather"}}, "search.toolsets: expected a list of toolset names"),
])
def test_a_wrong_selection_is_refused_at_its_place(endpoint, llm, defs, selection, words):
    ep = endpoint(defs)
    answer = ep.post({"model": "default", "messages": [user("hi")], "gateway": {"tool_selection": selection}})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "gateway.tool_selection" and words in error["message"]
    assert llm.requests == []


def _tools(name: str, words: str) -> str:
    return "tools:\n" + "".join(f"""\
  - id: {name}_{n}
    name: {name.title()} {n}
    user_description: A tool.
    ai_description: {words}, way {n}.
    binding: {{http: {{url: "https://tools.invalid/{name}"}}}}
""" for n in range(5))


async def test_after_a_reload_the_offer_comes_from_the_last_index_merged(write_definitions, llm, monkeypatch):
    """The chat loop searches with the gateway's Searches: once a turn has searched, a reload's index is made at
    once from the last one (only the changed file's tools read), and the next turn offers the new tools."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-" + uuid.uuid4().hex)
    root = write_definitions({"weather.yaml": _tools("weather", "Tells the weather of a city"),
                              "tax.yaml": _tools("tax", "Tells the tax owed in a city")})
    settings = Settings(definitions=root, reload=False, providers={"default": openai_provider(llm)},
                        chat={"tool_selection": {"search": {"k": 3}}})
    gateway = Gateway(settings)
    loop = ChatLoop(load_loop_config(settings), gateway.http_client, searches=gateway.searches)
    request = parse_chat_request({"model": "default", "messages": [user("Will it rain in Oslo?")]})
    try:
        llm.answer(Reply(content="ok"), Reply(content="ok"))
        await loop.complete(gateway.catalog, request)
        assert not any(tool.startswith("rain_") for tool in offered(llm.requests[0]))
        merges: list[int] = []
        merged = bm25.BM25.merged.__func__
        monkeypatch.setattr(bm25.BM25, "merged", classmethod(
            lambda cls, previous, moved, added, size: merges.append(len(added)) or merged(cls, previous, moved,
                                                                                           added, size)))
        (root / "rain.yaml").write_text(_tools("rain", "Tells whether it will rain in a city"), encoding="utf-8")
        assert (await gateway.reload()).changed
        for task in list(gateway.searches._making.values()):
            await task
        assert merges == [5]  # made as the reload swapped the catalog in: the rain file's 5 tools read
        await loop.complete(gateway.catalog, request)
        assert merges == [5] and all(tool.startswith("rain_") for tool in offered(llm.requests[1]))
    finally:
        await gateway.aclose()
