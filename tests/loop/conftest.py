"""Fixtures of the loop tests: the scripted LLM (fake_llm.py) and a running chat endpoint, both on 127.0.0.1."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_llm import FakeLLM, Servers
from starlette.applications import Starlette
from starlette.routing import Route

from gateway.loop import ChatLoop, load_loop_config
from gateway.runtime import Gateway
from gateway.server import chat
from gateway.settings import Settings


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    running = Servers()
    yield running
    running.stop(list(running.running))


@pytest.fixture(scope="session")
def _llm_server(servers: Servers) -> FakeLLM:
    llm = FakeLLM()
    app = Starlette(routes=[Route("/v1/chat/completions", llm.handle, methods=["POST"]),
                            Route("/v1/messages", llm.handle, methods=["POST"])])
    llm.url = servers.start(app)
    return llm


@pytest.fixture
def llm(_llm_server: FakeLLM) -> Iterator[FakeLLM]:
    """The scripted LLM, with an empty script and no recorded requests."""
    _llm_server.reset()
    yield _llm_server
    _llm_server.reset()


def openai_provider(llm: FakeLLM, **extra: Any) -> dict[str, Any]:
    return {"kind": "openai", "base_url": llm.openai_url, "model": "fake-gpt", "api_key": "{{ secrets.FAKE_LLM_KEY }}",
            "max_retries": 2, **extra}


def anthropic_provider(llm: FakeLLM, **extra: Any) -> dict[str, Any]:
    return {"kind": "anthropic", "base_url": llm.url, "model": "fake-claude", "api_key": "{{ secrets.FAKE_LLM_KEY }}",
            **extra}


@dataclass
class Endpoint:
    """A running gateway serving the chat routes: its base URL, the gateway, and the waits between retries."""

    url: str
    gateway: Gateway
    sleeps: list[float]

    def post(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + "/v1/chat/completions", json=body, timeout=30, **kwargs)


@pytest.fixture
def endpoint(servers: Servers, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Endpoint]]:
    """Start the chat endpoint over a definitions directory; ``providers``/``chat`` default to the fake LLM."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-" + uuid.uuid4().hex)
    started: list[str] = []

    def start(definitions: Path, providers: dict[str, Any] | None = None, chat_settings: dict[str, Any] | None = None,
              **settings: Any) -> Endpoint:
        effective = Settings(definitions=definitions, reload=False,
                             providers=providers if providers is not None else {"default": openai_provider(llm)},
                             chat=chat_settings or {}, **settings)
        gateway = Gateway(effective)
        sleeps: list[float] = []

        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)  # recorded, not waited: tests assert on what was asked, never on time

        loop = ChatLoop(load_loop_config(effective), gateway.http_client, sleep=sleep)

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            await gateway.aclose()

        url = servers.start(Starlette(routes=chat.routes(gateway, loop), lifespan=lifespan), lifespan="on")
        started.append(url)
        return Endpoint(url, gateway, sleeps)

    yield start
    servers.stop(started)
