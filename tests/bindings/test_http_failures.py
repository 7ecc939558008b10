"""Every way an upstream call fails becomes an error result the LLM can read and act on."""

from __future__ import annotations

from http_tools import http_tool

from gateway.invoke import invoke


async def test_connection_refused(build_tools, closed_port):
    """Nothing listening: the result says the connection was refused, where, and that a retry may help."""
    catalog = build_tools(http_tool({"url": f"http://127.0.0.1:{closed_port}/x"}))
    result = await invoke(catalog, "t")
    assert result.is_error
    assert f"127.0.0.1:{closed_port} refused the connection" in result.text
    assert "retrying later may help" in result.text


async def test_dns_failure(build_tools):
    """A host name that does not resolve is reported as a DNS failure naming the host."""
    catalog = build_tools(http_tool({"url": "http://no-such-host.invalid/x", "timeout_s": 5}))
    result = await invoke(catalog, "t")
    assert result.is_error
    assert "the host name 'no-such-host.invalid' could not be resolved (DNS lookup failed" in result.text


async def test_read_timeout(upstream, build_tools):
    """An upstream slower than the binding's timeout_s gives a timeout result, not a hang or a crash."""
    catalog = build_tools(http_tool({"url": upstream.at("/slow?s=3"), "timeout_s": 0.2}))
    result = await invoke(catalog, "t")
    assert result.is_error
    assert "did not answer within 0.2 s" in result.text


async def test_non_2xx_gives_status_and_short_excerpt(upstream, build_tools):
    """A 4xx/5xx answer names the status, a hint, and a short excerpt of the body (not all of it)."""
    catalog = build_tools(http_tool({"url": upstream.at("/status/{{ args.code }}")},
                                    {"code": {"type": "integer"}}))
    not_found = await invoke(catalog, "t", {"code": 404})
    assert not_found.is_error
    assert f"GET {upstream.url}/status/404: the service answered HTTP 404 Not Found (check the arguments)" \
        in not_found.text
    assert '"error":"status 404 as asked"' in not_found.text
    assert not_found.text.endswith("…") and len(not_found.text) < 500
    failed = await invoke(catalog, "t", {"code": 500})
    assert "HTTP 500 Internal Server Error (the service failed; retrying later may help)" in failed.text
    limited = await invoke(catalog, "t", {"code": 429})
    assert "rate limited" in limited.text


async def test_non_json_when_json_expected(upstream, build_tools):
    """HTML where JSON was expected, or JSON that does not parse, is an error result with an excerpt."""
    catalog = build_tools(
        http_tool({"url": upstream.at("/html"), "response": {"expect": "json"}}, tool_id="html"),
        http_tool({"url": upstream.at("/html"), "response": {"select": "/a"}}, tool_id="select"),
        http_tool({"url": upstream.at("/broken-json")}, tool_id="broken"))
    for tool in ("html", "select"):
        result = await invoke(catalog, tool)
        assert result.is_error
        assert "expected JSON, got text/html: <html><body>Maintenance</body></html>" in result.text
    broken = await invoke(catalog, "broken")
    assert broken.is_error and 'typed application/json, is not valid JSON: {"unterminated":' in broken.text


async def test_oversized_answer_stops_reading(upstream, build_tools):
    """An answer over response.max_bytes is an error result, whether its length is declared or streamed."""
    catalog = build_tools(
        http_tool({"url": upstream.at("/big?n=5000000"), "response": {"max_bytes": 100_000}}, tool_id="declared"),
        http_tool({"url": upstream.at("/big?n=5000000&chunked=1"), "response": {"max_bytes": 100_000}},
                  tool_id="streamed"),
        http_tool({"url": upstream.at("/big?n=1000"), "response": {"max_bytes": 1000}}, tool_id="fits"))
    for tool in ("declared", "streamed"):
        result = await invoke(catalog, tool)
        assert result.is_error
        assert "the answer is larger than 100000 bytes, the most this tool reads" in result.text
    assert (await invoke(catalog, "fits")).value == "a" * 1000


async def test_binary_answer_is_refused(upstream, build_tools):
    """Bytes that are not text (an image) are an error result saying what they were."""
    catalog = build_tools(http_tool({"url": upstream.at("/binary")}))
    result = await invoke(catalog, "t")
    assert result.is_error and "the answer is binary (image/png, 12 bytes)" in result.text


async def test_broken_compression(upstream, build_tools):
    """A body that claims gzip but is not is a decoding error result."""
    catalog = build_tools(http_tool({"url": upstream.at("/gzip-broken")}))
    result = await invoke(catalog, "t")
    assert result.is_error and "could not be decoded" in result.text


async def test_upstream_speaking_garbage(build_tools, garbage_port):
    """A server that does not speak HTTP is a protocol error result."""
    catalog = build_tools(http_tool({"url": f"http://127.0.0.1:{garbage_port}/"}))
    result = await invoke(catalog, "t")
    assert result.is_error and "answered with invalid HTTP" in result.text


async def test_redirect_loop(upstream, build_tools):
    """Endless same-host redirects stop after a few hops with an error result."""
    catalog = build_tools(http_tool({"url": upstream.at("/loop")}))
    result = await invoke(catalog, "t")
    assert result.is_error and "redirected too many times (more than 5)" in result.text


async def test_missing_secret_is_a_load_warning_and_a_call_error(upstream, build_tools, monkeypatch):
    """A secret not in the environment warns at load (file:line:col) and fails the call naming only the secret."""
    monkeypatch.delenv("HTTP_ABSENT_TOKEN", raising=False)
    catalog = build_tools(http_tool({"url": upstream.at("/flaky/absent-secret"),
                                     "headers": {"X-Key": "{{ secrets.HTTP_ABSENT_TOKEN }}"}}))
    [warning] = catalog.warnings
    assert warning.severity == "warning" and warning.file == "tools.yaml" and warning.line > 1
    assert "secret 'HTTP_ABSENT_TOKEN' is not set in the environment" in warning.message
    result = await invoke(catalog, "t")
    assert result.is_error
    assert "secret(s) HTTP_ABSENT_TOKEN not set" in result.text
    assert upstream.attempts["absent-secret"] == 0  # the call failed before any request was sent


async def test_retries_idempotent_requests_until_success(upstream, build_tools):
    """With retries, a GET that meets 503 is sent again (with backoff) and the success is the result."""
    catalog = build_tools(http_tool({"url": upstream.at("/flaky/get-ok?fail=2"), "retries": 2}))
    result = await invoke(catalog, "t")
    assert not result.is_error, result.text
    assert result.value == {"attempts": 3, "method": "GET"}


async def test_retries_give_up_with_the_last_error(upstream, build_tools):
    """When every attempt fails, the result is the last failure, after exactly 1 + retries attempts."""
    catalog = build_tools(http_tool({"url": upstream.at("/flaky/get-fail?fail=9"), "retries": 1}))
    result = await invoke(catalog, "t")
    assert result.is_error and "HTTP 503" in result.text
    assert upstream.attempts["get-fail"] == 2


async def test_post_is_not_retried_unless_declared_safe(upstream, build_tools):
    """A POST is retried only with retry_unsafe; without retries a 503 is answered at once."""
    catalog = build_tools(
        http_tool({"method": "POST", "url": upstream.at("/flaky/post-once?fail=1")}, tool_id="once"),
        http_tool({"method": "POST", "url": upstream.at("/flaky/post-safe?fail=1"), "retries": 1,
                   "retry_unsafe": True}, tool_id="safe"))
    assert (await invoke(catalog, "once")).is_error
    assert upstream.attempts["post-once"] == 1
    assert (await invoke(catalog, "safe")).value == {"attempts": 2, "method": "POST"}
