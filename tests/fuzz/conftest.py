"""Fixtures of the adversarial suite: one gateway serving the shipped tools to fuzz, and an LLM that always answers.

The server is shared by the whole directory (session scope): fuzzing is read-mostly, and starting one server
keeps the suite inside its time budget. Its HTTP tools (http-demo.yaml) are pointed at the demo API the same
server mounts under ``/demo``, so fuzzed arguments travel a real HTTP binding to a real upstream.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import httpx
import pytest
from fake_llm import FakeLLM, Reply, Servers
from fuzz_support import FuzzServer
from starlette.requests import Request
from starlette.responses import Response
from support import CONSOLE, EXAMPLES, serving

from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings


class AlwaysAnswers(FakeLLM):
    """The scripted LLM with an endless script: every request gets a short text answer, so the chat endpoint's
    own behaviour is what the fuzzer sees (never a 502 for an exhausted script)."""

    async def handle(self, request: Request) -> Response:
        if not self.script:
            self.script.append(Reply("fuzzed answer"))
        self.requests.clear()  # nothing reads them back here; keep memory flat
        return await super().handle(request)


@pytest.fixture(scope="session")
def always_llm(servers: Servers) -> AlwaysAnswers:
    llm = AlwaysAnswers()
    llm.url = servers.start(llm.openai_app())
    return llm


@pytest.fixture(scope="session")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory, always_llm: AlwaysAnswers) -> Iterator[FuzzServer]:
    """The shipped tools (HTTP tools aimed at this server's /demo) with a chat provider, auth off."""
    definitions = tmp_path_factory.mktemp("fuzz") / "tool-definitions"
    shutil.copytree(EXAMPLES, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    provider = {"kind": "openai", "base_url": always_llm.openai_url, "model": "fake-gpt", "max_retries": 0}
    gateway = Gateway(Settings(definitions=definitions, reload=False, providers={"default": provider}))
    with serving(create_app(gateway), lifespan="on") as server, httpx.Client(base_url=server.url, timeout=30, auth=CONSOLE) as client:
        demo = definitions / "http-demo.yaml"
        # Settings.port is not the free port served here, so the tools get this server's address written in.
        demo.write_text(demo.read_text().replace("{{ gateway.base_url }}", server.url))
        reloaded = client.post("/admin/reload").json()
        assert reloaded["ok"] and reloaded["changed"], reloaded
        yield FuzzServer(server.url, gateway, definitions, client)
