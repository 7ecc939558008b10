"""Arguments can never change where an HTTP tool's request goes: not the scheme, host or port, not the path
outside their own segment, not the headers; redirects to other hosts are refused unless the definition allows."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from http_tools import http_tool

from gateway.invoke import invoke

PATH_ATTACKS = [
    "..", ".", "../../admin", "..%2F..%2Fadmin", "%2e%2e", "//evil.example/x", "@evil.example", "evil.example:80@x",
    "a?admin=true", "a#fragment", "%2F", "a/b", "\\\\evil.example\\x", "http://evil.example/", " ", "é/ü",
]


@pytest.mark.parametrize("value", PATH_ATTACKS)
async def test_path_argument_stays_one_segment_on_the_fixed_host(upstream, build_tools, value):
    """Whatever a path argument holds, the request goes to the definition's host and port, the argument fills
    exactly its own segment (percent-encoded), and the upstream decodes it back to the very same string."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/items/{{ args.id }}/detail")},
                                    {"id": {"type": "string"}}))
    result = await invoke(catalog, "t", {"id": value})
    assert not result.is_error, result.text
    echoed = result.value
    assert echoed["host"] == f"127.0.0.1:{upstream.port}"
    raw = echoed["raw_path"]
    assert raw.startswith("/echo/items/") and raw.endswith("/detail")
    segment = raw[len("/echo/items/"):-len("/detail")]
    assert "/" not in segment and "?" not in segment and "#" not in segment
    assert unquote(segment) == value
    assert echoed["query"] == []


@pytest.mark.parametrize("value", ["x\r\nX-Injected: 1", "x\nX-Injected: 1", "x\rX-Injected: 1", "x\x00y"])
async def test_header_values_with_line_breaks_are_refused(upstream, build_tools, value):
    """A header value holding CR, LF or another control character is an error result, and nothing is sent."""
    catalog = build_tools(http_tool({"url": upstream.at("/flaky/crlf"), "headers": {"X-Trace": "{{ args.v }}"}},
                                    {"v": {"type": "string"}}))
    result = await invoke(catalog, "t", {"v": value})
    assert result.is_error
    assert "the value for header 'X-Trace' contains a line break or control character" in result.text
    assert upstream.attempts["crlf"] == 0


@pytest.mark.parametrize(("value", "sent"), [
    ("a; admin=1", "a%3B%20admin=1"), ("x\r\nX-Injected: 1", "x%0D%0AX-Injected:%201"), ("Zoë ,", "Zo%C3%AB%20%2C"),
    (["x", "y; admin=2"], "x%2Cy%3B%20admin=2"), ("tok+/=%41", "tok+/=%41")])
async def test_cookie_header_values_are_one_cookie_each(upstream, build_tools, monkeypatch, value, sent):
    """In a Cookie header every `{{ }}` output is exactly one cookie-value (outside RFC 6265's cookie-octets
    percent-encoded; a list is its items joined by commas): an argument never adds a cookie nor a header, an
    omitted one leaves no empty pair, and the definition's own text and a valid secret are sent as written."""
    monkeypatch.setenv("HTTP_COOKIE_SECRET", "s3cr3t/+=")
    catalog = build_tools(http_tool(
        {"url": upstream.at("/echo/c"),
         "headers": {"Cookie": "sid={{ args.v }}; {% if args.lang is defined %}lang={{ args.lang }}{% endif %}; theme=dark;"
                               "key={{ secrets.HTTP_COOKIE_SECRET }}"}},
        {"v": {}, "lang": {"type": "string"}}))
    result = await invoke(catalog, "t", {"v": value})
    assert not result.is_error, result.text
    assert result.value["headers"]["cookie"] == f"sid={sent}; theme=dark; key=[secret HTTP_COOKIE_SECRET]"
    assert "x-injected" not in result.value["headers"]


async def test_query_argument_cannot_add_parameters(upstream, build_tools):
    """`&`, `=` and `#` in a query argument stay inside its own value."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/q"), "query": {"q": "{{ args.q }}"}},
                                    {"q": {"type": "string"}}))
    result = await invoke(catalog, "t", {"q": "x&admin=true#frag"})
    assert result.value["query"] == [["q", "x&admin=true#frag"]]


async def test_redirect_to_another_host_is_not_followed(upstream, build_tools):
    """A redirect to another host (localhost is not 127.0.0.1) or another scheme is an error result."""
    other = f"http://localhost:{upstream.port}/echo/elsewhere"
    catalog = build_tools(http_tool({"url": upstream.at("/redirect"), "query": {"to": "{{ args.to }}"}},
                                    {"to": {"type": "string"}}))
    result = await invoke(catalog, "t", {"to": other})
    assert result.is_error
    assert f"the service redirected to another host (http://localhost:{upstream.port})" in result.text
    for target in ("file:///etc/passwd", f"http://127.0.0.1:{upstream.port + 1}/x"):
        assert (await invoke(catalog, "t", {"to": target})).is_error


async def test_allowed_redirect_host_is_followed_without_secret_headers(upstream, build_tools, monkeypatch):
    """A host in allow_redirect_hosts is followed, but headers holding secrets are not sent to it."""
    monkeypatch.setenv("HTTP_REDIRECT_TOKEN", "redirect-secret-value")
    http = {"url": upstream.at("/redirect"), "query": {"to": "{{ args.to }}"}, "allow_redirect_hosts": ["localhost"],
            "headers": {"X-Key": "{{ secrets.HTTP_REDIRECT_TOKEN }}", "X-Plain": "kept"}}
    catalog = build_tools(http_tool(http, {"to": {"type": "string"}}))
    away = await invoke(catalog, "t", {"to": f"http://localhost:{upstream.port}/echo/elsewhere"})
    assert not away.is_error, away.text
    assert away.value["host"] == f"localhost:{upstream.port}"
    assert "x-key" not in away.value["headers"] and away.value["headers"]["x-plain"] == "kept"
    home = await invoke(catalog, "t", {"to": "/echo/home"})
    assert home.value["path"] == "/echo/home" and home.value["headers"]["x-key"] == "[secret HTTP_REDIRECT_TOKEN]"


async def test_same_origin_redirect_keeps_method_and_body_for_307(upstream, build_tools):
    """A 307 within the origin is followed with the same method and body."""
    catalog = build_tools(http_tool({"method": "POST", "url": upstream.at("/redirect?to=/echo/moved&code=307"),
                                     "json": {"n": 1}}))
    result = await invoke(catalog, "t")
    assert result.value["method"] == "POST" and result.value["json"] == {"n": 1}
    assert result.value["path"] == "/echo/moved"


async def test_redirects_not_followed_when_disabled(upstream, build_tools):
    """With follow_redirects false, a redirect is an error result naming where it pointed."""
    catalog = build_tools(http_tool({"url": upstream.at("/redirect?to=/echo/next"), "follow_redirects": False}))
    result = await invoke(catalog, "t")
    assert result.is_error
    assert "HTTP 302 Found, a redirect to /echo/next, which this tool does not follow" in result.text
