"""Retries fit inside the tool's timeout_s: each attempt gets its share, and a binding that cannot fit warns."""

from __future__ import annotations

from http_tools import http_tool

from gateway.invoke import invoke


async def test_an_attempt_that_times_out_is_retried_within_the_tool_timeout(upstream, build_tools):
    """With retries and no http.timeout_s, a first attempt that hangs times out early enough for attempt 2."""
    catalog = build_tools(http_tool({"url": upstream.at("/slow-once/split?s=5"), "retries": 1}, timeout_s=2))
    result = await invoke(catalog, "t")
    assert not result.is_error, result.text
    assert result.value == {"attempts": 2}


async def test_an_explicit_attempt_timeout_is_retried(upstream, build_tools):
    """An http.timeout_s shorter than the tool's timeout bounds each attempt, and the retry answers."""
    catalog = build_tools(http_tool({"url": upstream.at("/slow-once/explicit?s=5"), "retries": 2,
                                     "timeout_s": 0.5}, timeout_s=5))
    result = await invoke(catalog, "t")
    assert not result.is_error, result.text
    assert result.value == {"attempts": 2}
    assert catalog.warnings == ()


async def test_attempts_longer_than_the_tool_timeout_warn_at_load(upstream, build_tools):
    """http.timeout_s × (1 + retries) over the tool's timeout is a load warning at the binding's timeout_s."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/x"), "retries": 2, "timeout_s": 4}, timeout_s=10))
    [warning] = catalog.warnings
    assert warning.severity == "warning" and warning.file == "tools.yaml" and warning.line > 1
    assert "timeout_s 4 s × 3 attempts = 12 s, more than the tool's timeout_s of 10 s" in warning.message
    default = build_tools(http_tool({"url": upstream.at("/echo/x"), "timeout_s": 45}))
    [warning] = default.warnings
    assert "more than the tool's timeout_s of 30 s" in warning.message
