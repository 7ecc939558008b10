"""The HTTP binding builds the request the definition declares: templated path and query, typed JSON bodies,
forms, text, headers with secrets, context values; arguments are data and never templates."""

from __future__ import annotations

import pytest
from http_tools import http_tool

from gateway.context import CallContext
from gateway.invoke import invoke

SECRET = "tok-3f9a-very-secret"


async def test_get_with_path_and_query_templating(upstream, build_tools):
    """Path segments and query parameters are filled from arguments; a list repeats its query key."""
    catalog = build_tools(http_tool(
        {"url": upstream.at("/echo/stations/{{ args.station }}/days/{{ args.day }}?units=metric"),
         "query": {"q": "{{ args.q }}", "tag": "{{ args.tags }}", "fixed": 3, "flag": "{{ args.flag }}"}},
        {"station": {"type": "string"}, "day": {"type": "integer"}, "q": {"type": "string"},
         "tags": {"type": "array", "items": {"type": "string"}}, "flag": {"type": "boolean"}}))
    result = await invoke(catalog, "t", {"station": "oslo", "day": 3, "q": "a b&c=d", "tags": ["x", "y"],
                                         "flag": False})
    assert not result.is_error, result.text
    echoed = result.value
    assert echoed["method"] == "GET"
    assert echoed["raw_path"] == "/echo/stations/oslo/days/3"
    assert echoed["query"] == [["units", "metric"], ["q", "a b&c=d"], ["tag", "x"], ["tag", "y"], ["fixed", "3"],
                               ["flag", "false"]]


async def test_omitted_optional_query_parameters_are_left_out(upstream, build_tools):
    """An optional argument that was not given removes its query parameter instead of sending an empty one."""
    catalog = build_tools(http_tool(
        {"url": upstream.at("/echo/search"),
         "query": {"q": "{{ args.q }}", "limit": "{{ args.limit }}", "page": "{{ args.page | default(1) }}"}},
        {"q": {"type": "string"}, "limit": {"type": "integer"}, "page": {"type": "integer"}}))
    result = await invoke(catalog, "t", {"q": "rain"})
    assert result.value["query"] == [["q", "rain"], ["page", "1"]]


async def test_post_json_body_keeps_argument_types(upstream, build_tools):
    """A JSON leaf that is exactly {{ args.x }} sends x's own JSON type; omitted optional arguments drop keys."""
    catalog = build_tools(http_tool(
        {"method": "POST", "url": upstream.at("/echo/readings"),
         "json": {"emails": "{{ args.emails }}", "count": "{{ args.count }}", "ratio": "{{ args.ratio }}",
                  "active": "{{ args.active }}", "owner": "{{ args.owner }}", "note": "{{ args.note }}",
                  "optional": "{{ args.optional }}", "label": "count={{ args.count }}",
                  "nested": {"inner": ["{{ args.count }}", "{{ args.optional }}", "lit"]},
                  "constant": 7, "all": "{{ args }}"}},
        {"emails": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"},
         "ratio": {"type": "number"}, "active": {"type": "boolean"}, "owner": {"type": "object"},
         "note": {"type": ["string", "null"]}, "optional": {"type": "string"}}))
    arguments = {"emails": ["a@example.com", "b@example.com"], "count": 3, "ratio": 0.5, "active": True,
                 "owner": {"name": "Ada", "tags": ["x"]}, "note": None}
    result = await invoke(catalog, "t", arguments)
    assert not result.is_error, result.text
    assert result.value["method"] == "POST"
    assert result.value["headers"]["content-type"] == "application/json"
    assert result.value["json"] == {
        "emails": ["a@example.com", "b@example.com"], "count": 3, "ratio": 0.5, "active": True,
        "owner": {"name": "Ada", "tags": ["x"]}, "note": None, "label": "count=3",
        "nested": {"inner": [3, "lit"]}, "constant": 7, "all": arguments,
    }


async def test_form_and_text_bodies(upstream, build_tools):
    """A form body is url-encoded (lists repeat their key); a text body is rendered and sent as text/plain."""
    catalog = build_tools(
        http_tool({"method": "POST", "url": upstream.at("/echo/form"),
                   "form": {"name": "{{ args.name }}", "ids": "{{ args.ids }}", "skip": "{{ args.skip }}"}},
                  {"name": {"type": "string"}, "ids": {"type": "array"}, "skip": {"type": "string"}}, tool_id="form"),
        http_tool({"method": "PUT", "url": upstream.at("/echo/text"),
                   "text": "Dear {{ args.name }},\n{% for i in args.ids %}- {{ i }}\n{% endfor %}"},
                  {"name": {"type": "string"}, "ids": {"type": "array"}}, tool_id="text"))
    form = await invoke(catalog, "form", {"name": "Zoë & co", "ids": [1, 2]})
    assert form.value["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert form.value["body"] == "name=Zo%C3%AB+%26+co&ids=1&ids=2"
    text = await invoke(catalog, "text", {"name": "Ada", "ids": [1, 2]})
    assert text.value["method"] == "PUT"
    assert text.value["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert text.value["body"] == "Dear Ada,\n- 1\n- 2\n"


async def test_header_with_secret_is_sent_but_never_shown(upstream, build_tools, monkeypatch):
    """{{ secrets.NAME }} is read from the environment at call time and redacted from what the LLM sees."""
    monkeypatch.setenv("HTTP_TEST_TOKEN", SECRET)
    catalog = build_tools(http_tool(
        {"url": upstream.at("/echo/secure"),
         "headers": {"Authorization": "Bearer {{ secrets.HTTP_TEST_TOKEN }}", "X-Api-Version": 2,
                     "X-Trace": "{{ args.trace }}"}},
        {"trace": {"type": "string"}}))
    result = await invoke(catalog, "t", {})
    assert not result.is_error, result.text
    headers = result.value["headers"]
    # The upstream received the secret (it echoes it back); the result the LLM reads has it redacted.
    assert headers["authorization"] == "Bearer [secret HTTP_TEST_TOKEN]"
    assert SECRET not in result.text
    assert headers["x-api-version"] == "2"
    assert "x-trace" not in headers  # omitted argument, omitted header
    assert catalog.warnings == ()
    assert "HTTP_TEST_TOKEN" not in str(catalog.get("t").describe())


async def test_secret_is_read_at_call_time(upstream, build_tools, monkeypatch):
    """A secret set after the catalog was built (rotated) is used by the next call without a reload."""
    monkeypatch.delenv("HTTP_LATE_TOKEN", raising=False)
    catalog = build_tools(http_tool({"url": upstream.at("/echo/late"),
                                     "headers": {"X-Key": "{{ secrets.HTTP_LATE_TOKEN }}"}}))
    monkeypatch.setenv("HTTP_LATE_TOKEN", "first-value")
    assert (await invoke(catalog, "t")).value["headers"]["x-key"] == "[secret HTTP_LATE_TOKEN]"
    monkeypatch.setenv("HTTP_LATE_TOKEN", "second-value")
    result = await invoke(catalog, "t")
    assert result.value["headers"]["x-key"] == "[secret HTTP_LATE_TOKEN]"
    assert "second-value" not in result.text and "first-value" not in result.text


async def test_argument_values_are_never_rendered(upstream, build_tools):
    """An argument containing {{ ... }} or {% ... %} is sent as those characters, in every part of the request."""
    attempt = "{{ secrets.HOME }}{{ 7*7 }}{% for x in range(3) %}x{% endfor %}"
    catalog = build_tools(http_tool(
        {"method": "POST", "url": upstream.at("/echo/{{ args.v }}"), "query": {"q": "{{ args.v }}"},
         "headers": {"X-V": "{{ args.v }}"}, "json": {"v": "{{ args.v }}", "s": "<{{ args.v }}>"}},
        {"v": {"type": "string"}}))
    result = await invoke(catalog, "t", {"v": attempt})
    echoed = result.value
    assert echoed["query"] == [["q", attempt]]
    assert echoed["headers"]["x-v"] == attempt
    assert echoed["json"] == {"v": attempt, "s": f"<{attempt}>"}
    assert echoed["path"] == "/echo/" + attempt
    assert "49" not in result.text.replace(f":{upstream.port}", "")  # 7*7 nowhere (the port may hold a 49)


async def test_context_values_fill_templates(upstream, build_tools):
    """{{ context.conversation_id }} and {{ context.user }} come from the call; unset ones drop their header."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/ctx"),
                                     "headers": {"X-Conversation": "{{ context.conversation_id }}",
                                                 "X-User": "{{ context.user }}"}}))
    result = await invoke(catalog, "t", {}, CallContext(conversation_id="conv-42"))
    assert result.value["headers"]["x-conversation"] == "conv-42"
    assert "x-user" not in result.value["headers"]


@pytest.mark.parametrize("method", ["DELETE", "PATCH", "OPTIONS"])
async def test_declared_method_is_used(upstream, build_tools, method):
    """The request uses the method the definition declares."""
    catalog = build_tools(http_tool({"method": method, "url": upstream.at("/echo/m")}))
    assert (await invoke(catalog, "t")).value["method"] == method


async def test_shared_client_is_used_when_the_gateway_provides_one(upstream, build_tools, shared_client):
    """With a running gateway's client in the build environment, calls go through it (pooled connections)."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/pooled")}), client=shared_client)
    for _ in range(3):
        assert not (await invoke(catalog, "t")).is_error
    assert [str(r.url) for r in shared_client.sent] == [upstream.at("/echo/pooled")] * 3
    assert not shared_client.is_closed


async def test_cookies_are_never_kept_between_calls(upstream, build_tools, shared_client):
    """A cookie set by an upstream is not sent on the next call: one user's session never reaches another's call."""
    catalog = build_tools(http_tool({"url": upstream.at("/cookie")}), client=shared_client)
    await invoke(catalog, "t")
    second = await invoke(catalog, "t")
    assert second.value == {"received": None}


async def test_non_ascii_header_values_are_sent_as_utf8(upstream, build_tools):
    """A header value outside ASCII (from an argument) is sent as UTF-8 bytes rather than failing the call."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/h"), "headers": {"X-Name": "{{ args.name }}"}},
                                    {"name": {"type": "string"}}))
    result = await invoke(catalog, "t", {"name": "Zoë"})
    assert not result.is_error, result.text
    assert result.value["headers"]["x-name"].encode("latin-1").decode("utf-8") == "Zoë"
