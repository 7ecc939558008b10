"""Tool search through a real server: REST ``GET /tools/search`` and the MCP meta-tools ``search_tools`` and
``call_tool`` (the official ``mcp`` client, both revisions), each finding only what the caller's key may use; a
reload changes what is found; the CLI's ``search``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support import REPO, running, until

from gateway.settings import ToolSearch, _api_key, hash_key

TOOLS = """\
tools:
  - id: get_forecast
    name: Weather forecast
    user_description: The weather to come.
    ai_description: Returns the weather forecast for a city over the next days.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {city: {type: string, description: The city.}}, required: [city]}
    toolsets: [weather]
  - id: add_numbers
    name: Add
    user_description: Adds.
    ai_description: Adds two numbers and returns their sum.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {a: {type: number}, b: {type: number}}}
    toolsets: [math]
  - id: employee_salary
    name: Employee salary
    user_description: What an employee earns.
    ai_description: Returns the yearly salary of an employee, by their name.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {employee: {type: string, description: Their full name.}}}
    toolsets: [hr]
  - id: get_time
    name: Current time
    user_description: Tells the time.
    ai_description: Returns the current date and time.
    binding: {python: "desk:echo"}
    toolsets: [weather, math, hr]
"""
CODE = "def echo(**arguments) -> dict:\n    return arguments\n"
SHADOWED = """\
tools:
  - id: search_tools
    name: Search tools
    user_description: A catalog tool named like the meta-tool.
    ai_description: Searches the tool shed.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {query: {type: string}}}
    toolsets: [math]
"""
KEYS = (_api_key({"name": "all", "sha256": hash_key("all-key")}),
        _api_key({"name": "weather", "sha256": hash_key("weather-key"), "toolsets": ["weather"]}),
        _api_key({"name": "lister", "sha256": hash_key("lister-key"), "tool_search": False}))


@pytest.fixture
def definitions(write_definitions) -> Path:
    return write_definitions({"desk.yaml": TOOLS, "python/desk.py": CODE})


def _search(url: str, key: str, **params) -> httpx.Response:
    return httpx.get(f"{url}/tools/search", params=params, headers={"Authorization": f"Bearer {key}"}, timeout=20)


def test_rest_search_ranks_and_keeps_to_the_keys_toolsets(definitions):
    """The salary question finds employee_salary first for a key that may use it; the weather key, asking the
    same, never gets it (nor any tool outside its toolsets), as its listing never shows it."""
    with running(definitions, api_keys=KEYS) as served:
        found = _search(served.url, "all-key", q="How much does Ada Lovelace earn a year?", k=3).json()["tools"]
        assert found[0]["id"] == "employee_salary" and found[0]["score"] > 0
        assert [tool["score"] for tool in found] == sorted((tool["score"] for tool in found), reverse=True)
        assert {"input_schema", "ai_description", "toolsets"} <= set(found[0])
        theirs = _search(served.url, "weather-key", q="How much does Ada Lovelace earn a year?", k=10).json()["tools"]
        assert {tool["id"] for tool in theirs} <= {"get_forecast", "get_time"}
        assert _search(served.url, "weather-key", q="weather in Paris").json()["tools"][0]["id"] == "get_forecast"
        narrowed = _search(served.url, "all-key", q="what is the time", toolset="math").json()["tools"]
        assert [tool["id"] for tool in narrowed] == ["get_time"]


@pytest.mark.parametrize(("params", "status", "words"), [
    ({}, 400, "Say what to search for"),
    ({"q": "   "}, 400, "Say what to search for"),
    ({"q": "time", "k": "0"}, 400, "k must be a whole number from 1 to 50"),
    ({"q": "time", "k": "51"}, 400, "k must be"),
    ({"q": "time", "k": "²"}, 400, "k must be"),
    ({"q": "the of and"}, 200, '{"tools":[]}'),
    ({"q": "time " * 10_000}, 200, "get_time"),  # 50 KB: the last 4,096 characters are read
])
def test_bad_searches_are_told_what_is_wrong(definitions, params, status, words):
    with running(definitions, api_keys=KEYS) as served:
        answer = _search(served.url, "all-key", **params)
    assert answer.status_code == status and words in answer.text


def test_an_anonymous_caller_searches_nothing(definitions):
    with running(definitions, api_keys=KEYS) as served:
        assert httpx.get(f"{served.url}/tools/search", params={"q": "time"}, timeout=20).status_code == 401


def test_a_reload_changes_what_search_finds(definitions):
    with running(definitions, api_keys=KEYS) as served:
        assert "payroll" not in json.dumps(_search(served.url, "all-key", q="payroll").json())
        (definitions / "desk.yaml").write_text(TOOLS.replace("yearly salary", "yearly payroll salary"),
                                               encoding="utf-8")
        import asyncio

        asyncio.run(served.gateway.reload())
        until(lambda: _search(served.url, "all-key", q="payroll").json()["tools"], "the edit found")
        assert _search(served.url, "all-key", q="payroll").json()["tools"][0]["id"] == "employee_salary"


async def _mcp(url: str, key: str):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return http, streamable_http_client(f"{url}/mcp", http_client=http)


async def test_mcp_lists_pinned_and_meta_tools_and_calls_through_them(definitions):
    """With tool_search on, the list is the pinned tool and the two meta-tools; search_tools finds within the
    key's toolsets; call_tool runs the found tool as a direct call would, and refuses one the key may not use
    with a direct call's very error. A key whose own tool_search is false gets the whole list."""
    settings = ToolSearch(mcp=True, always=("get_time",))
    with running(definitions, api_keys=KEYS, tool_search=settings) as served:
        http, transport = await _mcp(served.url, "weather-key")
        async with http, transport as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert [tool.name for tool in (await session.list_tools()).tools] == ["get_time", "search_tools",
                                                                                  "call_tool"]
            found = await session.call_tool("search_tools", {"query": "the weather in Oslo in the next days", "k": 3})
            assert not found.is_error
            assert found.structured_content["tools"][0]["name"] == "get_forecast"
            assert "inputSchema" in found.structured_content["tools"][0]
            salary = await session.call_tool("search_tools", {"query": "employee salary"})
            assert "employee_salary" not in salary.content[0].text
            called = await session.call_tool("call_tool", {"name": "get_forecast", "arguments": {"city": "Oslo"}})
            assert not called.is_error and called.structured_content == {"city": "Oslo"}
            invalid = await session.call_tool("call_tool", {"name": "get_forecast", "arguments": {"town": "Oslo"}})
            assert invalid.is_error and "city" in invalid.content[0].text
            for arguments in (None, {}):  # none given, or null: a direct call's very result
                through = await session.call_tool("call_tool", {"name": "get_forecast", "arguments": arguments})
                direct = await session.call_tool("get_forecast", arguments)
                assert through.is_error and (through.content, through.is_error) == (direct.content, direct.is_error)
            with pytest.raises(MCPError) as through_meta:
                await session.call_tool("call_tool", {"name": "employee_salary", "arguments": {}})
            with pytest.raises(MCPError) as direct:
                await session.call_tool("employee_salary", {})
            assert through_meta.value.message == direct.value.message == "Unknown tool 'employee_salary'."
        http, transport = await _mcp(served.url, "lister-key")
        async with http, Client(transport) as client:
            assert client.protocol_version == "2026-07-28"
            assert {tool.name for tool in (await client.list_tools()).tools} == {
                "get_forecast", "add_numbers", "employee_salary", "get_time"}


async def test_a_toolset_left_to_search_is_found_not_listed(definitions):
    """tool_search.toolsets: the tools of those toolsets (but the pinned ones) are left to search_tools, the
    others listed beside the meta-tools; a key that may use none of them lists its tools whole, and a key whose
    own tool_search is true leaves everything to search."""
    settings = ToolSearch(toolsets=("hr",), always=("get_time",))
    keys = (*KEYS, _api_key({"name": "searcher", "sha256": hash_key("searcher-key"), "tool_search": True}),
            _api_key({"name": "maths", "sha256": hash_key("maths-key"), "toolsets": ["weather", "math"]}))
    (definitions / "shadowed.yaml").write_text(SHADOWED, encoding="utf-8")
    with running(definitions, api_keys=keys, tool_search=settings) as served:
        http, transport = await _mcp(served.url, "all-key")
        async with http, transport as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert [tool.name for tool in (await session.list_tools()).tools] == [
                "get_forecast", "add_numbers", "get_time", "search_tools", "call_tool"]  # the catalog's shadowed
            found = await session.call_tool("search_tools", {"query": "the yearly salary of an employee"})
            assert found.structured_content["tools"][0]["name"] == "employee_salary"
            listed = await session.call_tool("search_tools", {"query": "the weather forecast for a city"})
            assert "get_forecast" not in {tool["name"] for tool in listed.structured_content["tools"]}
            called = await session.call_tool("call_tool", {"name": "employee_salary",
                                                           "arguments": {"employee": "Ada"}})
            assert not called.is_error and called.structured_content == {"employee": "Ada"}
            shadowed = await session.call_tool("call_tool", {"name": "search_tools", "arguments": {}})
            assert not shadowed.is_error and shadowed.structured_content == {}
        for key, names in (("weather-key", {"get_forecast", "get_time"}),
                           ("lister-key", {"get_forecast", "add_numbers", "employee_salary", "get_time",
                                           "search_tools"}),  # the catalog's own, listed: it searches nothing
                           ("searcher-key", {"get_time", "search_tools", "call_tool"}),
                           # none of hr's tools but the pinned time: the catalog's search_tools listed as itself
                           ("maths-key", {"get_forecast", "add_numbers", "get_time", "search_tools"})):
            http, transport = await _mcp(served.url, key)
            async with http, Client(transport) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == names, key
        for key in ("lister-key", "maths-key"):
            http, transport = await _mcp(served.url, key)
            async with http, Client(transport) as client:
                own = await client.call_tool("search_tools", {"query": "salary"})
                assert own.structured_content == {"query": "salary"}, key  # no meta-tools: the catalog's tool
        http, transport = await _mcp(served.url, "weather-key")
        async with http, Client(transport) as client:
            with pytest.raises(MCPError, match="Unknown tool 'search_tools'"):  # neither: not one of its tools
                await client.call_tool("search_tools", {"query": "salary"})


async def test_few_tools_are_listed_whole(definitions):
    """min_tools: a key that may use no more tools than that lists them all, search or not."""
    settings = ToolSearch(mcp=True, min_tools=2)
    with running(definitions, api_keys=KEYS, tool_search=settings) as served:
        http, transport = await _mcp(served.url, "weather-key")  # get_forecast and get_time: 2
        async with http, Client(transport) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {"get_forecast", "get_time"}
        http, transport = await _mcp(served.url, "all-key")
        async with http, Client(transport) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {"search_tools", "call_tool"}


def test_the_cli_searches_a_directory(definitions):
    run = subprocess.run([sys.executable, "-m", "gateway", "search", str(definitions), "weather in Lisbon", "-k",
                          "2", "--json"], capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["tools"][0]["id"] == "get_forecast"
    refused = subprocess.run([sys.executable, "-m", "gateway", "search", str(definitions), "x", "-k", "99"],
                             capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert refused.returncode == 2 and "-k must be from 1 to 50" in refused.stderr


def test_the_settings_bound_of_k_is_the_search_bound():
    from gateway.search import MAX_K
    from gateway.settings import MAX_SEARCH_K

    assert MAX_SEARCH_K == MAX_K


@pytest.mark.parametrize(("value", "words"), [
    ("on", "expected a mapping"),
    ({"mcp": "yes"}, "must be true or false"),
    ({"always": "get_time"}, "expected a list of tool ids"),
    ({"toolsets": "hr"}, "expected a list of toolset names"),
    ({"mcp": True, "toolsets": ["hr"]}, "give one of them"),
    ({"k": 0}, "from 1 to 50"),
    ({"min_tools": -1}, "0 or more"),
    ({"search": True}, "unknown key(s) search"),
])
def test_a_wrong_tool_search_setting_is_refused_saying_why(tmp_path, value, words):
    from gateway.settings import SettingsInvalid, load_settings

    path = tmp_path / "settings.yaml"
    path.write_text(json.dumps({"tool_search": value}), encoding="utf-8")
    with pytest.raises(SettingsInvalid, match=re.escape(words)):
        load_settings(path)


async def test_a_search_after_a_reload_finds_the_next_index_made(definitions):
    """Once anyone searched, a reload's catalog gets its index in a worker thread as it is swapped in."""
    with running(definitions, api_keys=KEYS) as served:
        assert _search(served.url, "all-key", q="time").json()["tools"]
        (definitions / "desk.yaml").write_text(TOOLS.replace("yearly salary", "yearly payroll salary"),
                                               encoding="utf-8")
        await served.gateway.reload()
        from gateway.search.index import made

        until(lambda: made(served.gateway.catalog) is not None, "the next index made before any search")


def test_anthropic_tool_search_listing_defers_all_but_the_pinned(definitions):
    """``?format=anthropic&defer_loading=bm25``: Anthropic's search tool first, every tool deferred but the pinned
    one — a shape the anthropic SDK's own beta types accept; defer_loading with another format is a 400."""
    from anthropic.types.beta import BetaToolUnionParam
    from pydantic import TypeAdapter

    with running(definitions, api_keys=KEYS, tool_search=ToolSearch(always=("get_time",))) as served:
        listed = httpx.get(f"{served.url}/tools", params={"format": "anthropic", "defer_loading": "bm25"},
                           headers={"Authorization": "Bearer all-key"}, timeout=20).json()["tools"]
        regex = httpx.get(f"{served.url}/tools", params={"format": "anthropic", "defer_loading": "regex"},
                          headers={"Authorization": "Bearer all-key"}, timeout=20).json()["tools"]
        refused = httpx.get(f"{served.url}/tools", params={"format": "openai", "defer_loading": "bm25"},
                            headers={"Authorization": "Bearer all-key"}, timeout=20)
    assert listed[0] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert regex[0]["type"] == "tool_search_tool_regex_20251119"
    deferred = {tool["name"]: tool.get("defer_loading", False) for tool in listed[1:]}
    assert deferred == {"get_forecast": True, "add_numbers": True, "employee_salary": True, "get_time": False}
    TypeAdapter(list[BetaToolUnionParam]).validate_python(listed)
    assert refused.status_code == 400 and "format=anthropic" in refused.text


def test_a_deferred_listing_defers_only_the_toolsets_left_to_search(definitions):
    """With ``tool_search.toolsets``, a provider's deferred listing defers only those toolsets' tools, as MCP
    leaves only them to search_tools: the others are loaded up front."""
    with running(definitions, api_keys=KEYS, tool_search=ToolSearch(toolsets=("hr",))) as served:
        listed = httpx.get(f"{served.url}/tools", params={"format": "openai-responses", "defer_loading": "server"},
                           headers={"Authorization": "Bearer all-key"}, timeout=20).json()["tools"]
    deferred = {tool["name"]: tool.get("defer_loading", False) for tool in listed[1:]}
    assert deferred == {"get_forecast": False, "add_numbers": False, "employee_salary": True, "get_time": True}
    with running(definitions, api_keys=KEYS, tool_search=ToolSearch(toolsets=("hr",), always=("get_time",))) as served:
        theirs = httpx.get(f"{served.url}/tools", params={"format": "anthropic", "defer_loading": "bm25"},
                           headers={"Authorization": "Bearer weather-key"}, timeout=20).json()["tools"]
    # The weather key's tools: its forecast (no toolset left to search) and the pinned time: nothing to find, so
    # no search tool either.
    assert [(tool["name"], "defer_loading" in tool) for tool in theirs] == [("get_forecast", False),
                                                                             ("get_time", False)]


def test_the_dense_model_finds_what_no_word_of_the_tool_says(definitions):
    """``tool_search: {dense: true}`` (the search-dense extra): "rain" finds the weather forecast, which BM25 alone
    cannot (no word of the question is in the tool), and MCP's search_tools ranks the same way."""
    question = "will it rain in Oslo tomorrow?"
    with running(definitions, api_keys=KEYS) as served:
        assert _search(served.url, "all-key", q=question).json()["tools"] == []
    with running(definitions, api_keys=KEYS, tool_search=ToolSearch(dense=True)) as served:
        found = _search(served.url, "all-key", q=question, k=2).json()["tools"]
        assert found[0]["id"] == "get_forecast"
        assert _search(served.url, "all-key", q="xyzzy quux").json()["tools"] == []  # near nothing: no fit


def test_dense_search_without_its_extra_is_refused_at_load(tmp_path, monkeypatch):
    from gateway import settings

    monkeypatch.setattr(settings, "find_spec", lambda name: None)
    path = tmp_path / "settings.yaml"
    path.write_text(json.dumps({"tool_search": {"dense": True}}), encoding="utf-8")
    with pytest.raises(settings.SettingsInvalid, match=re.escape("pip install 'tool-gateway[search-dense]'")):
        settings.load_settings(path)


@pytest.mark.parametrize("execution", ["server", "client"])
def test_openai_responses_tool_search_listing_defers_all_but_the_pinned(definitions, execution):
    """``?format=openai-responses&defer_loading=server|client``: the Responses API's tool search first (executed by
    OpenAI, or by the caller with a query), every function deferred but the pinned one — a list the openai SDK's
    own types accept; a variant of another provider's search is a 400 naming each provider's."""
    from openai.types.responses import ToolParam
    from pydantic import TypeAdapter

    with running(definitions, api_keys=KEYS, tool_search=ToolSearch(always=("get_time",))) as served:
        listed = httpx.get(f"{served.url}/tools", params={"format": "openai-responses", "defer_loading": execution},
                           headers={"Authorization": "Bearer all-key"}, timeout=20).json()["tools"]
        refused = httpx.get(f"{served.url}/tools", params={"format": "openai-responses", "defer_loading": "bm25"},
                            headers={"Authorization": "Bearer all-key"}, timeout=20)
    assert listed[0]["type"] == "tool_search" and listed[0].get("execution", "server") == execution
    assert ("query" in listed[0]["parameters"]["properties"]) if execution == "client" else listed[0] == {
        "type": "tool_search"}
    deferred = {tool["name"]: tool.get("defer_loading", False) for tool in listed[1:]}
    assert deferred == {"get_forecast": True, "add_numbers": True, "employee_salary": True, "get_time": False}
    assert all(tool["type"] == "function" and tool["strict"] is False for tool in listed[1:])
    TypeAdapter(list[ToolParam]).validate_python(listed)
    assert refused.status_code == 400
    assert "format=anthropic and defer_loading=bm25 or regex" in refused.text
    assert "format=openai-responses and defer_loading=server or client" in refused.text


def test_search_answers_in_a_providers_format_within_the_keys_reach(definitions):
    """``GET /tools/search?format=openai-responses``: the found tools, best first, as the declarations a caller
    hands back in a ``tool_search_output`` (the openai SDK's type accepts the item); only the key's tools."""
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    with running(definitions, api_keys=KEYS) as served:
        everyone = _search(served.url, "all-key", q="the salary of an employee", format="openai-responses").json()
        weather = _search(served.url, "weather-key", q="the salary of an employee", format="openai-responses")
        anthropic = _search(served.url, "all-key", q="weather forecast", format="anthropic", k=1).json()
        unknown = _search(served.url, "all-key", q="weather", format="xml")
    assert everyone["format"] == "openai-responses" and everyone["tools"][0]["name"] == "employee_salary"
    assert "employee_salary" not in weather.text  # not the weather key's: never found
    TypeAdapter(ResponseInputItemParam).validate_python(
        {"type": "tool_search_output", "call_id": "call_1", "execution": "client", "tools": everyone["tools"]})
    assert [tool["name"] for tool in anthropic["tools"]] == ["get_forecast"] and "input_schema" in anthropic["tools"][0]
    assert unknown.status_code == 400 and "openai-responses" in unknown.text


def test_a_responses_api_client_searches_the_gateway_and_calls_what_it_found(definitions):
    """The official openai client against a scripted Responses API server: the model asks the caller's tool search
    (``execution: client``) for a query; the caller answers with what the gateway's search finds in that format;
    the model then calls the found tool, which the gateway runs."""
    import openai
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from support import start_server

    sent: list[dict] = []

    async def responses(request: Request) -> JSONResponse:
        body = await request.json()
        sent.append(body)
        if len(sent) == 1:  # the model asks the search the caller executes
            output = [{"type": "tool_search_call", "id": "ts_1", "call_id": "call_search", "execution": "client",
                       "status": "completed", "arguments": {"query": "weather forecast for a city"}}]
        else:  # the model calls a tool the search output loaded
            loaded = next(item for item in body["input"] if item.get("type") == "tool_search_output")
            name = loaded["tools"][0]["name"]
            output = [{"type": "function_call", "id": "fc_1", "call_id": "call_tool", "name": name,
                       "arguments": json.dumps({"city": "Oslo"}), "status": "completed"}]
        return JSONResponse({"id": f"resp_{len(sent)}", "object": "response", "created_at": 0, "model": "gpt-5.4",
                             "status": "completed", "output": output, "parallel_tool_calls": True,
                             "tool_choice": "auto", "tools": body.get("tools", [])})

    llm = start_server(Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])]))
    try:
        with running(definitions, api_keys=KEYS) as served:
            auth = {"Authorization": "Bearer weather-key"}
            tools = httpx.get(f"{served.url}/tools", params={"format": "openai-responses",
                                                             "defer_loading": "client"},
                              headers=auth, timeout=20).json()["tools"]
            client = openai.OpenAI(base_url=f"{llm.url}/v1", api_key="sk-test", max_retries=0)
            question = {"role": "user", "content": "What will the weather be in Oslo?"}
            first = client.responses.create(model="gpt-5.4", input=[question], tools=tools)
            call = first.output[0]
            assert call.type == "tool_search_call" and call.execution == "client"
            found = httpx.get(f"{served.url}/tools/search", params={"q": call.arguments["query"], "k": 3,
                                                                    "format": "openai-responses"},
                              headers=auth, timeout=20).json()["tools"]
            second = client.responses.create(model="gpt-5.4", tools=tools, input=[
                question, {"type": "tool_search_output", "call_id": call.call_id, "execution": "client",
                           "tools": found}])
            function_call = second.output[0]
            result = httpx.post(f"{served.url}/tools/{function_call.name}/call", headers=auth, timeout=20,
                                json=json.loads(function_call.arguments))
    finally:
        llm.stop()
    assert [tool.get("defer_loading", False) for tool in sent[0]["tools"][1:]] == [True, True]  # the key's two
    assert sent[0]["tools"][0]["execution"] == "client"
    assert function_call.name == "get_forecast" and result.status_code == 200
    assert result.json()["result"] == {"city": "Oslo"}


def test_a_wrong_listing_is_a_400_whatever_etag_it_sends_and_its_error_is_short(definitions):
    """A format or defer_loading that is wrong answers 400 even with the catalog's current ETag (a condition is not
    evaluated for an answer that would not be a 2xx), and the error quotes a long wrong value cut short."""
    auth = {"Authorization": "Bearer all-key"}
    with running(definitions, api_keys=KEYS) as served:
        etag = httpx.get(f"{served.url}/tools", headers=auth, timeout=20).headers["ETag"]
        assert httpx.get(f"{served.url}/tools", headers=auth | {"If-None-Match": etag}, timeout=20).status_code == 304
        for params in ({"format": "bogus"}, {"format": "anthropic", "defer_loading": "bogus"}):
            wrong = httpx.get(f"{served.url}/tools", params=params, headers=auth | {"If-None-Match": etag},
                              timeout=20)
            assert wrong.status_code == 400, params
        long = httpx.get(f"{served.url}/tools/search", params={"q": "weather", "format": "x" * 60_000},
                         headers=auth, timeout=20)
    assert long.status_code == 400 and len(long.content) < 500 and "openai-responses" in long.text


def test_requests_do_not_churn_the_memo_of_tools_short_texts():
    """Callers' requests, short or long, never enter the memo of short texts that tools' ids, names and
    parameters share: endless requests cannot push the tools' out."""
    from gateway.search import text

    text._short_terms.cache_clear()
    for n in range(100):
        text.query_terms(f"weather in city {n}")
        text.query_parts(f"weather in city {n}. Then the time in town {n}")
    assert text._short_terms.cache_info().currsize == 0
