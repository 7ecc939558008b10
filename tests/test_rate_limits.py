"""Rate limits in memory mode (one process): on tools and on API keys, refused calls as results, 429 on REST,
an error result on MCP, the events' "rejected" outcome, and failing closed when the shared state is down."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fake_llm import FakeLLM, Reply, openai_provider
from mcp import Client
from support import CONSOLE, serving

from gateway.bindings import BuildEnv
from gateway.catalog.build import build_catalog
from gateway.context import CallContext
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.events import Activity, EventBus, Observer
from gateway.invoke import invoke
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import ApiKey, Settings, SettingsInvalid, hash_key, load_settings
from gateway.state import StateUnavailable
from gateway.state.memory import MemoryState

LIMITED = """\
tools:
  - id: limited_echo
    name: Limited echo
    user_description: Says its text back, three times an hour at most.
    ai_description: Returns the text.
    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    binding: {python: "limited:echo"}
    rate_limit: {calls: 3, per_s: 3600}
  - id: free_echo
    name: Free echo
    user_description: Says its text back.
    ai_description: Returns the text.
    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    binding: {python: "limited:echo"}
"""
LIMITED_PY = "def echo(text: str) -> str:\n    return text\n"
USER_KEY = "rate-limited-user-key"


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    root = tmp_path / "defs"
    (root / "python").mkdir(parents=True)
    (root / "limited.yaml").write_text(LIMITED)
    (root / "python" / "limited.py").write_text(LIMITED_PY)
    return root


class DownState(MemoryState):
    """Shared state whose store cannot be reached: every rate-limit check fails as Redis' would."""

    async def acquire(self, key: str, calls: int, per_s: float) -> float:
        raise StateUnavailable("shared state (Redis at redis://127.0.0.1:1) is unreachable: connection refused")


class Outcomes(Observer):
    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def end(self, activity: Activity) -> None:
        self.outcomes.append(activity.outcome)


def catalog(root: Path, state: MemoryState | None = None, events: EventBus | None = None, **settings: object):
    effective = Settings(definitions=root, **settings)
    env = BuildEnv(settings=effective, root=root, state=state or MemoryState(), events=events or EventBus())
    return build_catalog(load_definitions(root), effective, env)


async def test_a_tool_limit_lets_its_calls_through_then_refuses_with_when_to_retry(definitions):
    """calls: 3 per hour: three calls succeed, the next two are "rejected" error results saying when to retry."""
    events = EventBus()
    seen = Outcomes()
    events.subscribe(seen)
    served = catalog(definitions, events=events)

    results = [await invoke(served, "limited_echo", {"text": str(n)}) for n in range(5)]

    assert [r.is_error for r in results] == [False, False, False, True, True]
    refused = results[3]
    assert refused.outcome == "rejected" and refused.retry_after_s is not None and refused.retry_after_s > 0
    assert "rate limited to 3 call(s) per 3600 s; retry in" in refused.text
    assert seen.outcomes == ["ok", "ok", "ok", "rejected", "rejected"]


async def test_a_tool_without_a_limit_never_touches_the_shared_state(definitions):
    """With the store unreachable, an unlimited tool still answers; a limited one fails closed, saying why."""
    served = catalog(definitions, state=DownState())

    free = await invoke(served, "free_echo", {"text": "hi"})
    limited = await invoke(served, "limited_echo", {"text": "hi"})

    assert free.is_error is False and free.value == "hi"
    assert limited.is_error is True and limited.outcome == "error"
    assert "has a rate limit, and the shared state that counts it is unavailable" in limited.text
    assert "calls without a rate limit are unaffected" in limited.text


async def test_an_api_key_limit_counts_the_keys_calls_on_every_tool(definitions):
    """A key limited to 2 calls: its third call (on another tool) is refused; another caller is not limited."""
    keys = (ApiKey("user", hash_key(USER_KEY), rate_limit={"calls": 2, "per_s": 3600.0}),)
    served = catalog(definitions, api_keys=keys)
    user = CallContext(caller="user")

    first = await invoke(served, "free_echo", {"text": "1"}, user)
    second = await invoke(served, "limited_echo", {"text": "2"}, user)
    third = await invoke(served, "free_echo", {"text": "3"}, user)
    other = await invoke(served, "free_echo", {"text": "4"}, CallContext(caller="someone-else"))

    assert [first.is_error, second.is_error, third.is_error, other.is_error] == [False, False, True, False]
    assert third.outcome == "rejected" and "API key 'user' is rate limited to 2 call(s)" in third.text


async def test_invalid_arguments_use_none_of_the_limit(definitions):
    """A call whose arguments do not validate is answered as such and leaves the tool's calls untouched."""
    served = catalog(definitions)

    bad = [await invoke(served, "limited_echo", {"wrong": 1}) for _ in range(4)]
    good = [await invoke(served, "limited_echo", {"text": "ok"}) for _ in range(3)]

    assert {r.outcome for r in bad} == {"invalid_arguments"}
    assert [r.is_error for r in good] == [False, False, False]


def test_a_misshapen_rate_limit_is_a_definitions_problem(tmp_path):
    """`rate_limit: {calls: 0}` is reported at its file:line like any schema problem."""
    root = tmp_path / "defs"
    (root / "python").mkdir(parents=True)
    (root / "python" / "limited.py").write_text(LIMITED_PY)
    (root / "limited.yaml").write_text(LIMITED.replace("{calls: 3, per_s: 3600}", "{calls: 0}"))

    with pytest.raises(DefinitionsInvalid) as raised:
        build_catalog(load_definitions(root), Settings(definitions=root))

    assert any("limited.yaml" in str(p) and "rate_limit" in str(p) for p in raised.value.problems)


def test_settings_accept_a_rate_limit_on_an_api_key_and_refuse_a_bad_one(tmp_path):
    """api_keys entries take `rate_limit: {calls, per_s}`; a bad one names the key and the value."""
    good = tmp_path / "good.yaml"
    good.write_text(json.dumps({"api_keys": [{"name": "u", "sha256": hash_key("k"),
                                              "rate_limit": {"calls": 5, "per_s": 60}}]}))
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({"api_keys": [{"name": "u", "sha256": hash_key("k"),
                                             "rate_limit": {"calls": "5", "per_s": 60}}]}))

    assert load_settings(good, environ={}).api_keys[0].rate_limit == {"calls": 5, "per_s": 60.0}
    with pytest.raises(SettingsInvalid, match="api key 'u': 'rate_limit' must be"):
        load_settings(bad, environ={})


@asynccontextmanager
async def rest_client(definitions: Path, **settings: object) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    gateway = Gateway(Settings(definitions=definitions, reload=False, **settings))
    with serving(create_app(gateway), lifespan="on") as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            yield client, server.url


async def test_rest_answers_a_refused_call_with_429_retry_after_and_the_result(definitions):
    """REST: the fourth call is HTTP 429 with an integer Retry-After and the JSON error shape holding the result."""
    async with rest_client(definitions) as (client, _):
        answers = [await client.post("/tools/limited_echo/call", json={"text": "x"}) for _ in range(4)]

    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    refused = answers[3]
    assert refused.headers["retry-after"].isdigit() and int(refused.headers["retry-after"]) >= 1
    body = refused.json()
    assert body["status"] == 429 and "rate limited" in body["error"]
    assert body["result"]["is_error"] is True and body["result"]["tool"] == "limited_echo"


async def test_mcp_answers_a_refused_call_with_an_error_result(definitions):
    """MCP: a call past the limit is an isError result whose text says when to retry (no protocol error)."""
    async with rest_client(definitions) as (_, url), Client(url + "/mcp") as client:
        results = [await client.call_tool("limited_echo", {"text": "m"}) for _ in range(4)]

    assert [r.is_error for r in results] == [False, False, False, True]
    assert "retry in" in results[3].content[0].text


async def test_a_reload_keeps_counting(definitions):
    """The limit is counted in the gateway's state, not the catalog's: a reload does not give the calls back."""
    async with rest_client(definitions) as (client, _):
        for _ in range(3):
            assert (await client.post("/tools/limited_echo/call", json={"text": "x"})).status_code == 200
        (definitions / "limited.yaml").write_text(LIMITED.replace("Says its text back.", "Echoes."))
        reloaded = await client.post("/admin/reload", auth=CONSOLE)
        after = await client.post("/tools/limited_echo/call", json={"text": "x"})

    assert reloaded.status_code == 200 and reloaded.json()["changed"] is True
    assert after.status_code == 429


PETS = {"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {"/pets/{id}": {"get": {"operationId": "getPet", "summary": "One pet",
                                         "parameters": [{"name": "id", "in": "path", "required": True,
                                                         "schema": {"type": "string"}}],
                                         "responses": {"200": {"description": "the pet"}}}}}}


def test_a_source_tool_takes_a_rate_limit(tmp_path):
    """`tools: {getPet: {rate_limit: ...}}` on an openapi source limits the generated tool like a written one."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "pets.json").write_text(json.dumps(PETS))
    (root / "api.yaml").write_text("sources:\n  - id: pets\n    openapi: {spec: pets.json}\n"
                                   "    tools: {getPet: {rate_limit: {calls: 1, per_s: 60}}}\n")

    served = build_catalog(load_definitions(root), Settings(definitions=root))

    assert served.tools["getPet"].definition.rate_limit == {"calls": 1, "per_s": 60}


async def test_the_chat_loop_gives_a_refused_call_to_the_model(definitions, servers, monkeypatch):
    """In a chat turn, the model calls a tool limited to three four times: one call's tool result is the refusal."""
    llm = FakeLLM()
    llm.url = servers.start(llm.openai_app())
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-rate-limits")
    calls = [(f"call_{n}", "limited_echo", {"text": str(n)}) for n in range(4)]
    llm.answer(Reply(tool_calls=calls), Reply(content="done"))

    async with rest_client(definitions, providers={"scripted": openai_provider(llm)},
                           chat={"provider": "scripted"}) as (client, _):
        answer = await client.post("/v1/chat/completions", json={
            "model": "scripted", "messages": [{"role": "user", "content": "echo four times"}]})

    assert answer.status_code == 200, answer.text
    tool_messages = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_0", "call_1", "call_2", "call_3"]
    refused = [m for m in tool_messages if "rate limited to 3 call(s) per 3600 s" in m["content"]]
    assert len(refused) == 1  # whichever of the four came last to the limit
