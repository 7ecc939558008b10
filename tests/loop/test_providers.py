"""The provider clients on their own: retries and Retry-After, timeouts, secrets, quirks of compatible servers."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx
import pytest
from fake_llm import FakeLLM, Reply, Status, anthropic_provider, openai_provider

from gateway.loop import ModelRequest, ProviderError, ProviderTimeout, load_loop_config
from gateway.loop.providers import make_provider
from gateway.settings import Settings

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def provider(monkeypatch: pytest.MonkeyPatch):
    """Build a provider client from settings; its waits between retries are recorded in ``.sleeps``."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-secret-value-1234")
    async with httpx.AsyncClient() as client:

        def build(settings: dict[str, Any]) -> Any:
            config = load_loop_config(Settings(providers={"p": settings})).providers["p"]
            sleeps: list[float] = []

            async def sleep(seconds: float) -> None:
                sleeps.append(seconds)

            built = make_provider(config, lambda: client, sleep=sleep)
            built.sleeps = sleeps
            return built

        yield build


async def test_429_then_200_waits_what_retry_after_asks(provider, llm: FakeLLM):
    """A 429 with Retry-After (seconds, milliseconds or an HTTP date) is retried after that wait, then succeeds."""
    in_30_s = email.utils.formatdate(time.time() + 30, usegmt=True)
    llm.answer(Status(429, {"Retry-After": "1"}), Status(429, {"retry-after-ms": "250"}),
               Status(429, {"Retry-After": in_30_s}), Reply(content="ok"))
    client = provider(openai_provider(llm, max_retries=3))
    reply = await client.complete(ModelRequest("fake-gpt", HELLO))
    assert reply.content == "ok" and len(llm.requests) == 4
    assert client.sleeps[:2] == [1.0, 0.25] and 25 < client.sleeps[2] <= 30


async def test_retries_give_up_after_max_retries(provider, llm: FakeLLM):
    """5xx answers are retried max_retries times; then the provider's own message is reported with 502."""
    llm.answer(Status(503, message="overloaded"), Status(502, message="still overloaded"))
    client = provider(openai_provider(llm, max_retries=1))
    with pytest.raises(ProviderError, match="answered 502: still overloaded") as caught:
        await client.complete(ModelRequest("fake-gpt", HELLO))
    assert caught.value.status == 502 and len(llm.requests) == 2 and len(client.sleeps) == 1


async def test_a_retry_after_longer_than_the_gateway_waits_fails_at_once(provider, llm: FakeLLM):
    """A Retry-After beyond the gateway's limit is not waited for: the error says how long was asked."""
    llm.answer(Status(429, {"Retry-After": "3600"}, message="rate limited"))
    client = provider(openai_provider(llm))
    with pytest.raises(ProviderError, match="rate limited.*retry after 3600 s"):
        await client.complete(ModelRequest("fake-gpt", HELLO))
    assert len(llm.requests) == 1 and client.sleeps == []


async def test_streamed_requests_are_retried_too(provider, llm: FakeLLM):
    """A 429 before a stream starts is retried like any other request."""
    llm.answer(Status(429, {"Retry-After": "0"}), Reply(content="streamed"))
    client = provider(anthropic_provider(llm))
    items = [item async for item in client.stream(ModelRequest("fake-claude", HELLO))]
    assert "".join(i for i in items if isinstance(i, str)) == "streamed" and items[-1].content == "streamed"
    assert client.sleeps == [0.0]


async def test_timeout_is_reported_as_504(provider, llm: FakeLLM):
    """A provider slower than timeout_s gives ProviderTimeout (504), naming the limit."""
    llm.answer(Status(200, delay_s=2))
    client = provider(openai_provider(llm, timeout_s=0.2, max_retries=0))
    with pytest.raises(ProviderTimeout, match="did not answer within 0.2 s") as caught:
        await client.complete(ModelRequest("fake-gpt", HELLO))
    assert caught.value.status == 504


async def test_unreachable_provider(provider, llm: FakeLLM):
    """A provider nobody listens on is reported as refusing connections, after the retries."""
    client = provider({"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 1})
    with pytest.raises(ProviderError, match="LLM provider 'p': 127.0.0.1:9 refused the connection"):
        await client.complete(ModelRequest("m", HELLO))
    assert len(client.sleeps) == 1


async def test_missing_secret_is_named_and_nothing_is_sent(provider, llm: FakeLLM, monkeypatch):
    """An api_key whose environment variable is unset fails naming the variable, before any request."""
    monkeypatch.delenv("FAKE_LLM_KEY")
    client = provider(openai_provider(llm))
    with pytest.raises(ProviderError, match="FAKE_LLM_KEY"):
        await client.complete(ModelRequest("fake-gpt", HELLO))
    assert llm.requests == []


async def test_a_key_echoed_in_an_error_is_redacted(provider, llm: FakeLLM):
    """When a provider quotes the API key back in its error, the gateway's message shows only the secret's name."""
    llm.answer(Status(401, message="Incorrect API key provided: sk-secret-value-1234"))
    client = provider(openai_provider(llm))
    with pytest.raises(ProviderError) as caught:
        await client.complete(ModelRequest("fake-gpt", HELLO))
    assert "sk-secret-value-1234" not in str(caught.value) and "[secret FAKE_LLM_KEY]" in str(caught.value)


async def test_azure_style_headers_and_query(provider, llm: FakeLLM):
    """Templated extra headers and query parameters (Azure's api-key and api-version) are sent."""
    llm.answer(Reply(content="ok"))
    client = provider({"kind": "openai", "base_url": llm.openai_url, "model": "deployment",
                       "headers": {"api-key": "{{ secrets.FAKE_LLM_KEY }}"}, "query": {"api-version": "2024-10-21"}})
    await client.complete(ModelRequest("deployment", HELLO))
    [sent] = llm.requests
    assert sent.headers["api-key"] == "sk-secret-value-1234" and "authorization" not in sent.headers
    assert sent.query == {"api-version": "2024-10-21"}


async def test_compatible_server_quirks_are_absorbed(provider, llm: FakeLLM):
    """Tool calls without ids get one; a reply with tool calls is a tool_calls reply, streamed or not."""
    client = provider(openai_provider(llm, params={"temperature": 0}))
    llm.answer(Reply(tool_calls=[("", "sum", {"a": 1, "b": 2})]), Reply(tool_calls=[("", "sum", '{"a": 1, "b": 2}')]))
    whole = await client.complete(ModelRequest("fake-gpt", HELLO, params={"top_p": 0.5}))
    streamed = [item async for item in client.stream(ModelRequest("fake-gpt", HELLO))][-1]
    for reply in (whole, streamed):
        [call] = reply.tool_calls
        assert call.id.startswith("call_") and call.name == "sum" and reply.finish_reason == "tool_calls"
        assert call.arguments.replace(" ", "") == '{"a":1,"b":2}'
    assert llm.requests[0].body["temperature"] == 0 and llm.requests[0].body["top_p"] == 0.5
