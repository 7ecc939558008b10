"""Every exception class httpx defines is caught by the HTTP binding and has its own LLM-readable message."""

from __future__ import annotations

import inspect

import httpx
import pytest

from gateway.upstream.http import MESSAGES, UPSTREAM_EXCEPTIONS, describe

URL = httpx.URL("https://api.example.com/v1/items?key=not-shown")


def httpx_exception_classes() -> list[type[Exception]]:
    """Exception classes found by walking httpx's modules and every subclass of what they hold."""
    found: set[type[Exception]] = set()
    modules = [httpx, *(m for name, m in vars(httpx).items() if inspect.ismodule(m) and name.startswith("_"))]
    for module in modules:
        found |= {obj for obj in vars(module).values()
                  if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__.startswith("httpx")}
    pending = list(found)
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub.__module__.startswith("httpx") and sub not in found:
                found.add(sub)
                pending.append(sub)
    return sorted(found, key=lambda cls: cls.__name__)


def instance(cls: type[Exception]) -> Exception:
    request = httpx.Request("GET", URL)
    if issubclass(cls, httpx.HTTPStatusError):
        return cls("boom", request=request, response=httpx.Response(500, request=request))
    if issubclass(cls, httpx.RequestError):
        return cls("boom", request=request)
    if issubclass(cls, httpx.StreamError) and cls is not httpx.StreamError:
        return cls()  # each subclass carries its own fixed message
    return cls("boom")


def test_walk_finds_the_whole_family():
    """The walk sees httpx's known families (so an empty walk cannot pass the tests below vacuously)."""
    names = {cls.__name__ for cls in httpx_exception_classes()}
    assert {"ConnectError", "ReadTimeout", "PoolTimeout", "RemoteProtocolError", "DecodingError",
            "TooManyRedirects", "HTTPStatusError", "InvalidURL", "StreamConsumed"} <= names
    assert len(names) >= 28


@pytest.mark.parametrize("cls", httpx_exception_classes(), ids=lambda cls: cls.__name__)
def test_every_httpx_exception_is_mapped(cls):
    """Each class has its own message (not only its parent's), is caught by the binding, and renders cleanly."""
    assert cls in MESSAGES, f"httpx.{cls.__name__} has no message in gateway.upstream.http.MESSAGES"
    exc = instance(cls)
    assert isinstance(exc, UPSTREAM_EXCEPTIONS)
    message = describe(exc, URL, timeout_s=2.5)
    assert message and "{" not in message
    assert "not-shown" not in message  # the query string (which may hold a key) is never repeated
    if "{host}" in MESSAGES[cls]:
        assert "api.example.com:443" in message


def test_timeouts_say_how_long_was_allowed():
    """A read timeout names the time the binding allowed."""
    assert "within 2.5 s" in describe(instance(httpx.ReadTimeout), URL, timeout_s=2.5)
