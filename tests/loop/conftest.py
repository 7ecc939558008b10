"""Fixtures of the loop tests: the scripted LLM (fake_llm.py) and a running chat endpoint, both on 127.0.0.1."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_llm import FakeLLM, Servers, openai_provider
from starlette.applications import Starlette
from starlette.routing import Route
from support import EXAMPLES

from gateway.loop import ChatLoop, load_loop_config
from gateway.loop.handoff import Handoffs
from gateway.runtime.gateway import Gateway
from gateway.server import chat
from gateway.settings import Settings


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


@dataclass
class Endpoint:
    """A running gateway serving the chat routes: its base URL, the gateway, the loop, and the waits between
    retries the loop asked for."""

    url: str
    gateway: Gateway
    loop: ChatLoop
    sleeps: list[float]

    def post(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + "/v1/chat/completions", json=body, timeout=30, **kwargs)


@pytest.fixture(scope="session")
def _endpoints(servers: Servers) -> dict[str, Endpoint]:
    """Running endpoints by their settings: tests with the same settings share one server."""
    return {}


@pytest.fixture
def endpoint(servers: Servers, _endpoints: dict[str, Endpoint], llm: FakeLLM,
             monkeypatch: pytest.MonkeyPatch) -> Callable[..., Endpoint]:
    """The chat endpoint over a definitions directory; ``providers``/``chat`` default to the fake LLM.

    A server is started once per distinct settings and shared; each test gets it with no remembered handoffs
    and no recorded waits.
    """
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-" + uuid.uuid4().hex)

    def start(definitions: Path, providers: dict[str, Any] | None = None, chat_settings: dict[str, Any] | None = None,
              **settings: Any) -> Endpoint:
        effective = Settings(definitions=definitions, reload=False,
                             providers=providers if providers is not None else {"default": openai_provider(llm)},
                             chat=chat_settings or {}, **settings)
        key = repr(effective)
        if key not in _endpoints:
            _endpoints[key] = _serve(servers, effective)
        running = _endpoints[key]
        running.sleeps.clear()
        running.loop.handoffs = Handoffs()
        return running

    return start


def _serve(servers: Servers, settings: Settings) -> Endpoint:
    gateway = Gateway(settings)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)  # recorded, not waited: tests assert on what was asked, never on time

    loop = ChatLoop(load_loop_config(settings), gateway.http_client, sleep=sleep, searches=gateway.searches)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await gateway.aclose()

    url = servers.start(Starlette(routes=chat.routes(gateway, loop), lifespan=lifespan), lifespan="on")
    return Endpoint(url, gateway, loop, sleeps)


LOOP_TOOLS = '''
tools:
  - id: meet
    name: Meet
    user_description: Waits until a partner call arrives.
    ai_description: Waits at a rendezvous for one other call, then returns its label.
    binding: {python: "loop_test_tools:meet"}
    toolsets: [test]
  - id: whoami
    name: Who am I
    user_description: Echoes the call context.
    ai_description: Returns the conversation id, user and tool call id of this call.
    binding: {python: "loop_test_tools:whoami"}
    toolsets: [test]
  - id: lookup_order
    name: Look up an order
    user_description: Shows an order.
    ai_description: Returns the status of an order by number.
    binding: {python: "loop_test_tools:lookup_order"}
    return_direct: true
    toolsets: [test]
  - id: get_booking_details
    name: Booking details
    user_description: Shows a booking.
    ai_description: Returns the details of a booking by number.
    binding: {python: "loop_test_tools:get_booking_details"}
    offer: {when_message_mentions: [booking, reservation]}
    toolsets: [test]
  - id: track_parcel
    name: Track a parcel
    user_description: Tracks a parcel.
    ai_description: Returns where a parcel is, by its tracking number.
    binding: {python: "loop_test_tools:track_parcel"}
    offer: {when_message_matches: "\\\\b[A-Z]{2}[0-9]{9}[A-Z]{2}\\\\b"}
    toolsets: [test]
  - id: roll
    name: Roll a die
    user_description: Rolls a die.
    ai_description: Returns a number from 1 to 6.
    binding: {python: "loop_test_tools:roll"}
    max_calls: 2
    toolsets: [test]
  - id: fill_field
    name: Fill a form field
    user_description: Fills a field of the form on screen.
    ai_description: Sets a field of the user's form to a value.
    scope: client
    input_schema:
      type: object
      properties:
        field: {type: string}
        value: {type: string}
      required: [field, value]
    output_schema: {type: string}
    binding:
      browser: {script: scripts/fill-field.js}
    toolsets: [test]
'''

LOOP_TOOLS_PY = '''
import threading

_lock = threading.Lock()
_rendezvous = threading.Barrier(2, timeout=10)
state = {"running": 0, "peak": 0}


def meet(label: str) -> str:
    with _lock:
        state["running"] += 1
        state["peak"] = max(state["peak"], state["running"])
    try:
        _rendezvous.wait()  # a lone call (no concurrency) breaks the barrier and fails
    finally:
        with _lock:
            state["running"] -= 1
    return f"{label} met (peak {state['peak']})"


def whoami(conversation_id, user, tool_call_id, metadata) -> dict:
    return {"conversation_id": conversation_id, "user": user, "tool_call_id": tool_call_id, "metadata": metadata}


def lookup_order(number: int) -> str:
    return f"Order {number}: shipped on 2024-05-02."


def get_booking_details(number: str) -> dict:
    return {"number": number, "guest": "A. Nowak", "nights": 3}


def track_parcel(number: str) -> str:
    return f"Parcel {number} is in Warsaw."


def roll() -> int:
    return 4
'''


@pytest.fixture(scope="session")
def defs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped tool-definitions plus the loop's test tools (toolset ``test``); read-only."""
    examples_dir = tmp_path_factory.mktemp("loop") / "tool-definitions"
    shutil.copytree(EXAMPLES, examples_dir, ignore=shutil.ignore_patterns("__pycache__"))
    (examples_dir / "loop-tests.yaml").write_text(LOOP_TOOLS.lstrip(), encoding="utf-8")
    (examples_dir / "python" / "loop_test_tools.py").write_text(LOOP_TOOLS_PY.lstrip(), encoding="utf-8")
    (examples_dir / "scripts" / "fill-field.js").write_text(
        "GatewayTools.register('fill_field', {execute: function (input) { return 'ok'; }});\n", encoding="utf-8")
    return examples_dir
