"""The HTTP binding shapes what the LLM reads: JSON or text, a selected part, a template, a size cap."""

from __future__ import annotations

import pytest
from http_tools import http_tool

from gateway.invoke import invoke


@pytest.mark.parametrize("select", ["/stations/1/name", "$.stations[1].name", "$['stations'][-1].name"])
async def test_select_by_pointer_or_path(upstream, build_tools, select):
    """`response.select` picks one value by JSON pointer or path expression."""
    catalog = build_tools(http_tool({"url": upstream.at("/demo/stations?country=NO&limit=2"),
                                     "response": {"select": select}}))
    result = await invoke(catalog, "t")
    assert not result.is_error, result.text
    assert result.value == "Bergen Florida"


async def test_select_with_wildcard_and_template(upstream, build_tools):
    """A wildcard path collects a list, and a template renders it (with the arguments at hand) as text."""
    catalog = build_tools(http_tool(
        {"url": upstream.at("/demo/stations"), "query": {"country": "{{ args.country }}"},
         "response": {"select": "$.stations[*]",
                      "template": "{{ result | length }} in {{ args.country }} (HTTP {{ status }}): "
                                  "{% for s in result %}{{ s.id }}{{ ', ' if not loop.last }}{% endfor %}"}},
        {"country": {"type": "string"}}))
    result = await invoke(catalog, "t", {"country": "NO"})
    assert result.value == "3 in NO (HTTP 200): oslo-blindern, bergen-florida, tromso"


async def test_missing_selection_is_an_error_saying_what_is_there(upstream, build_tools):
    """Selecting a member the answer lacks is an error result naming the path and the keys that exist."""
    catalog = build_tools(http_tool({"url": upstream.at("/demo/stations/tromso"),
                                     "response": {"select": "$.latest_reading.humidity"}}))
    result = await invoke(catalog, "t")
    assert result.is_error
    assert "no .humidity at $.latest_reading" in result.text
    assert "temperature_c" in result.text


async def test_max_chars_truncates_and_marks_it(upstream, build_tools):
    """`response.max_chars` cuts what the LLM reads and says how much was cut."""
    catalog = build_tools(http_tool({"url": upstream.at("/demo/stations"), "response": {"max_chars": 40}}))
    result = await invoke(catalog, "t")
    assert not result.is_error
    assert result.value.startswith('{"count": 8, "stations": [{"id": "oslo-b')
    head, mark = result.value.split("\n", 1)
    assert len(head) == 40
    assert mark.startswith("…[truncated: ") and mark.endswith(" more characters]")


async def test_text_answer_is_passed_as_text(upstream, build_tools):
    """A text/html answer is text for the LLM (auto), and `expect: text` reads a JSON answer as text."""
    catalog = build_tools(http_tool({"url": upstream.at("/html")}, tool_id="html"),
                          http_tool({"url": upstream.at("/demo/stations/tromso"), "response": {"expect": "text"}},
                                    tool_id="raw"))
    assert (await invoke(catalog, "html")).value == "<html><body>Maintenance</body></html>"
    raw = await invoke(catalog, "raw")
    assert isinstance(raw.value, str) and raw.value.startswith('{"id":"tromso"')


async def test_compressed_answer_is_decoded(upstream, build_tools):
    """A gzip-encoded answer is decompressed before it is parsed."""
    catalog = build_tools(http_tool({"url": upstream.at("/gzip")}))
    assert (await invoke(catalog, "t")).value == {"zipped": True}


async def test_empty_answer_says_the_call_succeeded(upstream, build_tools):
    """A 204 (or HEAD) answer is a success message, not an empty string or null."""
    catalog = build_tools(http_tool({"method": "POST", "url": upstream.at("/empty")}, tool_id="post"),
                          http_tool({"method": "HEAD", "url": upstream.at("/empty")}, tool_id="head"))
    assert (await invoke(catalog, "post")).value == "HTTP 204 No Content: the answer is empty (the request succeeded)."
    assert not (await invoke(catalog, "head")).is_error


async def test_accept_status_makes_a_status_a_success(upstream, build_tools):
    """A status listed in `accept_status` is a result, and 2xx statuses not listed are errors."""
    catalog = build_tools(http_tool({"url": upstream.at("/status/404"), "accept_status": [404],
                                     "response": {"select": "/error"}}, tool_id="nf"),
                          http_tool({"url": upstream.at("/echo/x"), "accept_status": [201]}, tool_id="ok"))
    assert (await invoke(catalog, "nf")).value == "status 404 as asked"
    wrong = await invoke(catalog, "ok")
    assert wrong.is_error and "HTTP 200 OK" in wrong.text


async def test_result_checked_against_output_schema(upstream, build_tools):
    """An HTTP result goes through the tool's output schema like any other tool's."""
    catalog = build_tools(http_tool({"url": upstream.at("/demo/stations/tromso")},
                                    output_schema={"type": "object", "required": ["id", "missing_field"]}))
    result = await invoke(catalog, "t")
    assert result.is_error and "missing_field" in result.text
