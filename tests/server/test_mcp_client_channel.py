"""Tools that talk to their MCP client while they run (``progress``, ``log``, ``client``: gateway.client_channel),
through the official ``mcp`` client against a served gateway: progress and logs arrive on the call's SSE stream,
elicitation and sampling are asked of the calling client and answered, and every caller that cannot hear or
answer (no capability, a JSON-only client, REST, 2026-07-28) gets a clear result at once."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from support import RunningServer, running, until_async

from gateway.server.mcp import fast, streamed

TOOLS = """
tools:
  - id: steps
    name: Steps
    user_description: Reports progress and logs at two levels.
    ai_description: Runs three steps.
    binding: {python: talk_tools:steps}
  - id: ask_user
    name: Ask user
    user_description: Asks the user for a name.
    ai_description: Asks the user for a name.
    binding: {python: talk_tools:ask_user}
  - id: ask_model
    name: Ask model
    user_description: Asks the client's model.
    ai_description: Asks the client's model.
    binding: {python: talk_tools:ask_model}
  - id: plain
    name: Plain
    user_description: Talks to nobody.
    ai_description: Answers at once.
    binding: {python: talk_tools:plain}
  - id: waits
    name: Waits
    user_description: Says it started, then waits.
    ai_description: Says it started, then waits a minute.
    binding: {python: talk_tools:waits}
    timeout_s: 120
  - id: silent
    name: Silent
    user_description: Could report progress, but takes its time saying nothing.
    ai_description: Waits a little.
    binding: {python: talk_tools:silent}
"""

PYTHON = '''
async def steps(progress, log) -> str:
    for done in (1, 2, 3):
        await progress(done, 3, f"step {done}")
    await log.info("an info line")
    await log.warning({"detail": "a warning"}, logger="steps")
    return "done"


async def ask_user(client) -> str:
    answer = await client.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}},
                                                "required": ["name"]})
    return f"{answer['action']}: {answer.get('content')}"


async def ask_model(client) -> str:
    answer = await client.sample("Say hi", max_tokens=20, systemPrompt="Be brief")
    return f"{answer['model']}: {answer['content']['text']}"


def plain() -> str:
    return "plain"


async def waits(progress) -> str:
    import asyncio
    from pathlib import Path

    await progress(0, 1, "started")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        Path(__file__).with_name("cancelled").write_text("cancelled")
        raise
    return "waited"


async def silent(progress) -> str:
    import asyncio

    await asyncio.sleep(0.7)
    return "quietly done"
'''

SSE_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("talking")
    (root / "tools.yaml").write_text(TOOLS)
    (root / "python").mkdir()
    (root / "python" / "talk_tools.py").write_text(textwrap.dedent(PYTHON))
    with running(root) as server:
        yield server


def _text(result: Any) -> str:
    return result.content[0].text


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # on 2026-07-28; this is 2025-11-25
async def test_progress_and_logs_arrive_on_the_calls_stream_at_the_level_the_session_set(served):
    """Progress carries the request's token, each step in order with its message; logging/setLevel (declared as
    the logging capability) holds back what is below the level."""
    logs: list[mcp_types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with streamable_http_client(f"{served.url}/mcp") as (read, write), \
            ClientSession(read, write, logging_callback=on_log) as session:
        initialized = await session.initialize()
        assert initialized.capabilities.logging is not None
        result = await session.call_tool("steps", {}, progress_callback=on_progress)
        assert (result.is_error, _text(result)) == (False, "done")
        assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        assert [(log.level, log.data) for log in logs] == [("info", "an info line"),
                                                         ("warning", {"detail": "a warning"})]
        assert await session.set_logging_level("warning") is not None
        logs.clear()
        await session.call_tool("steps", {})
        assert [(log.level, log.logger) for log in logs] == [("warning", "steps")]


async def test_the_tool_asks_the_calling_clients_user_and_model(served, streamed_calls):
    """elicitation/create and sampling/createMessage go to the client that made the call, inside the call, and
    the tool reads their answers (on the fast path: the questions in the call's stream, their answers POSTed on
    the session)."""
    asked: list[Any] = []

    async def on_elicit(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params)
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(context: Any, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        asked.append(params)
        return mcp_types.CreateMessageResult(role="assistant", model="tiny",
                                             content=mcp_types.TextContent(type="text", text="hi!"))

    async with streamable_http_client(f"{served.url}/mcp") as (read, write), \
            ClientSession(read, write, elicitation_callback=on_elicit, sampling_callback=on_sample) as session:
        await session.initialize()
        user = await session.call_tool("ask_user", {})
        model = await session.call_tool("ask_model", {})
    assert (user.is_error, _text(user)) == (False, "accept: {'name': 'Ada'}")
    assert (model.is_error, _text(model)) == (False, "tiny: hi!")
    assert asked[0].message == "Your name?" and asked[0].requested_schema["required"] == ["name"]
    assert asked[1].max_tokens == 20 and asked[1].system_prompt == "Be brief"
    assert asked[1].messages[0].content.text == "Say hi"
    assert streamed_calls == ["2025-11-25"] * 2


async def test_a_client_without_the_capability_gets_an_error_result_at_once(served):
    """A client that declared neither elicitation nor sampling is never asked: the call ends with an error
    result the LLM can read."""
    async with streamable_http_client(f"{served.url}/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        user = await session.call_tool("ask_user", {})
        model = await session.call_tool("ask_model", {})
    assert user.is_error and _text(user) == ("The calling client cannot answer elicitation (it did not declare the "
                                             "elicitation capability).")
    assert model.is_error and "cannot answer sampling" in _text(model)


async def test_rest_callers_hear_nothing_and_cannot_be_asked(served):
    """On REST progress and logs go nowhere (the tool still runs), and a question is an error result."""
    async with httpx.AsyncClient(base_url=served.url) as http:
        steps = (await http.post("/tools/steps/call", json={})).json()
        asked = (await http.post("/tools/ask_user/call", json={})).json()
    assert steps["is_error"] is False and steps["text"] == "done"
    assert asked["is_error"] is True and asked["text"] == "The calling client cannot answer elicitation."


async def _session(http: httpx.AsyncClient, capabilities: dict[str, Any]) -> dict[str, str]:
    opened = await http.post("/mcp", headers=SSE_ACCEPT, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "raw", "version": "1"}}})
    headers = {**SSE_ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def _call(request_id: int, name: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _events(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]


async def _next_event(lines: Any) -> dict[str, Any]:
    """The next message of an SSE answer being read (``lines``: its ``aiter_lines()``)."""
    async for line in lines:
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError("the stream ended without another message")


async def _rest(lines: Any) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) async for line in lines if line.startswith("data:")]


async def test_only_a_talking_call_is_answered_as_sse_and_only_when_the_client_accepts_it(served):
    """A plain call stays JSON (the fast path's answer); a talking one is an SSE stream carrying its progress
    before its answer; a client accepting only JSON gets JSON, with nothing else in it and its question refused."""
    async with httpx.AsyncClient(base_url=served.url) as http:
        headers = await _session(http, {"elicitation": {}})
        plain = await http.post("/mcp", headers=headers, json=_call(1, "plain"))
        assert plain.headers["content-type"] == "application/json"
        assert plain.json()["result"]["content"][0]["text"] == "plain"

        streamed = await http.post("/mcp", headers=headers, json=_call(2, "steps", {"progressToken": "t-1"}))
        assert streamed.headers["content-type"].startswith("text/event-stream")
        events = _events(streamed.text)
        assert [event["params"]["progress"] for event in events if event.get("method") == "notifications/progress"
                ] == [1, 2, 3]
        assert {event["params"]["progressToken"] for event in events if "progressToken" in event.get("params", {})
                } == {"t-1"}
        assert events[-1]["id"] == 2 and events[-1]["result"]["content"][0]["text"] == "done"

        json_only = {**headers, "Accept": "application/json"}
        quiet = await http.post("/mcp", headers=json_only, json=_call(3, "steps", {"progressToken": "t-2"}))
        assert quiet.headers["content-type"] == "application/json"
        assert quiet.json()["result"]["content"][0]["text"] == "done"
        refused = (await http.post("/mcp", headers=json_only, json=_call(4, "ask_user"))).json()["result"]
        assert refused["isError"] is True
        assert "cannot answer elicitation (this call's answer has no stream" in refused["content"][0]["text"]


async def test_a_client_that_never_answers_is_bounded_by_the_calls_timeout(tmp_path: Path):
    """An elicitation the client leaves unanswered ends with the tool's timeout, as any call does."""
    (tmp_path / "tools.yaml").write_text(TOOLS.replace("binding: {python: talk_tools:ask_user}",
                                                       "binding: {python: talk_tools:ask_user}\n    timeout_s: 0.5"))
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "talk_tools.py").write_text(textwrap.dedent(PYTHON))
    with running(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            headers = await _session(http, {"elicitation": {}})
            answer = await http.post("/mcp", headers=headers, json=_call(1, "ask_user"))
            events = _events(answer.text)
            assert events[0]["method"] == "elicitation/create"  # asked, and never answered
            assert events[-1]["result"]["isError"] is True
            assert events[-1]["result"]["content"][0]["text"] == "Tool 'ask_user' did not finish within 0.5 s."
            # The session goes on serving.
            assert (await http.post("/mcp", headers=headers, json=_call(2, "plain"))).json()["result"]["isError"] is False


async def test_on_the_stateless_revision_progress_streams_and_questions_take_another_round(served):
    """2026-07-28 (the SDK's Client settles on it): progress rides the call's SSE answer; a question ends the round
    with an input_required result, the client answers it and calls again, and the tool, run again, reads the
    answer where it asked (the SDK's client drives the rounds)."""
    progress: list[float] = []
    asked: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async def on_elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"name": "Grace"})

    async def on_sample(context: Any, params: Any) -> mcp_types.CreateMessageResult:
        return mcp_types.CreateMessageResult(role="assistant", model="m26",
                                             content=mcp_types.TextContent(type="text", text="hey"))

    async with Client(f"{served.url}/mcp", elicitation_callback=on_elicit, sampling_callback=on_sample) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("steps", {}, progress_callback=on_progress)
        user = await client.call_tool("ask_user", {})
        model = await client.call_tool("ask_model", {})
    assert (result.is_error, _text(result), progress) == (False, "done", [1, 2, 3])
    assert (user.is_error, _text(user), asked) == (False, "accept: {'name': 'Grace'}", ["Your name?"])
    assert (model.is_error, _text(model)) == (False, "m26: hey")


async def test_a_stateless_client_without_the_capability_is_refused_at_once(served):
    async with Client(f"{served.url}/mcp") as client:
        assert client.protocol_version == "2026-07-28"
        asked = await client.call_tool("ask_user", {})
    assert asked.is_error and _text(asked) == ("The calling client cannot answer elicitation (it did not declare "
                                               "the elicitation capability).")


async def test_a_forged_or_oversized_request_state_only_makes_the_tool_ask_again(served):
    """requestState comes back from the client: one that is not the gateway's JSON, or too long, carries no
    answers, so the tool asks again (an input_required result), never an error or a crash."""
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/call", "Mcp-Name": "ask_user"}
    async with httpx.AsyncClient(base_url=served.url) as http:
        for state in ("[1, 2]", "{not json", "{" * 100_000, '{"q0": "' + "x" * 300_000 + '"}',
                      '{"q0": {"action": "maybe"}}'):
            answer = await http.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "ask_user", "arguments": {}, "requestState": state, "_meta": envelope}})
            # Nothing was sent before the answer: the SDK answers it as JSON then.
            result = answer.json()["result"]
            assert result["resultType"] == "input_required", result
            assert result["inputRequests"]["q0"]["params"]["message"] == "Your name?"


MODERN_HEADERS = {**SSE_ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}


@pytest.fixture
def streamed_calls(monkeypatch) -> list[str]:
    """The revisions of the calls the fast path's streamed answer took (its ``answered``), for the test's
    requests."""
    taken: list[str] = []
    original = streamed.answered

    async def recording(call, channel, receive, send, added, sse, modern):
        taken.append("2026-07-28" if modern else "2025-11-25")
        return await original(call, channel, receive, send, added, sse, modern)

    monkeypatch.setattr(streamed, "answered", recording)
    return taken


def _modern_call(request_id: int, name: str, meta: dict[str, Any]) -> dict[str, Any]:
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}, **meta}
    return _call(request_id, name, envelope)


@pytest.mark.parametrize("meta", [
    {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"},
    {"progressToken": 7, "io.modelcontextprotocol/logLevel": "warning"},
    {},  # nothing asked for: nothing is said, and the answer is JSON
], ids=["progress-and-info", "warnings-only", "nothing-asked"])
async def test_a_stateless_talking_call_is_answered_by_the_fast_path_as_by_the_sdk(served, monkeypatch, meta,
                                                                                   streamed_calls):
    """2026-07-28: a call of a tool that talks is taken by the fast path (no SDK dispatch) and answered exactly as
    the SDK answers it: JSON while it has said nothing, an SSE stream of its notifications (progress with the
    request's token, logs at the request's level and above) and then its result once it has."""
    answers = []
    for enabled in (True, False):
        monkeypatch.setattr(fast, "ENABLED", enabled)
        async with httpx.AsyncClient(base_url=served.url) as http:
            answer = await http.post("/mcp", headers={**MODERN_HEADERS, "Mcp-Name": "steps"},
                                     json=_modern_call(5, "steps", meta))
        body = _events(answer.text) if answer.headers["content-type"].startswith("text/event-stream") else answer.json()
        answers.append((answer.status_code, answer.headers["content-type"], body))
    assert streamed_calls == ["2026-07-28"]  # the first request's: the second was the SDK's
    assert answers[0] == answers[1]
    status, content_type, body = answers[0]
    if meta:
        assert content_type == "text/event-stream"
        said = [event["method"] for event in body[:-1]]
        assert said == ["notifications/progress"] * 3 + ["notifications/message"] * (
            2 if meta["io.modelcontextprotocol/logLevel"] == "info" else 1)
        assert body[-1]["id"] == 5 and body[-1]["result"]["content"][0]["text"] == "done"
    else:
        assert (status, content_type, body["result"]["content"][0]["text"]) == (200, "application/json", "done")


async def test_a_stateless_client_that_closes_its_answer_cancels_the_call(tmp_path: Path, streamed_calls):
    """On 2026-07-28 a call is cancelled by closing its answer: the fast path's stream sees the client go and
    cancels the tool mid-wait (the tool notes its cancellation), and the gateway goes on serving."""
    (tmp_path / "tools.yaml").write_text(TOOLS)
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "talk_tools.py").write_text(textwrap.dedent(PYTHON))
    with running(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            request = http.build_request("POST", "/mcp", headers={**MODERN_HEADERS, "Mcp-Name": "waits"},
                                         json=_modern_call(1, "waits", {"progressToken": "w"}))
            response = await http.send(request, stream=True)
            assert response.headers["content-type"] == "text/event-stream"
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    assert json.loads(line[5:])["params"]["message"] == "started"
                    break
            await response.aclose()
            # Well within the call's own timeout (120 s), whose end would cancel the tool too.
            await until_async(lambda: (tmp_path / "python" / "cancelled").exists(), "the tool's cancellation", 20)
            again = await http.post("/mcp", headers={**MODERN_HEADERS, "Mcp-Name": "plain"},
                                    json=_modern_call(2, "plain", {}))
            assert again.json()["result"]["content"][0]["text"] == "plain"
    assert streamed_calls == ["2026-07-28"]


async def test_a_long_silent_stateless_call_is_kept_alive_with_pings(served, monkeypatch):
    """A talking call that runs past the ping interval without a word is answered as SSE, a comment line each
    interval (a proxy's idle-read timeout must not close it), its result last."""
    monkeypatch.setattr(streamed, "PING_INTERVAL_S", 0.2)
    async with httpx.AsyncClient(base_url=served.url) as http:
        answer = await http.post("/mcp", headers={**MODERN_HEADERS, "Mcp-Name": "silent"},
                                 json=_modern_call(3, "silent", {"progressToken": "s"}))
    assert answer.headers["content-type"] == "text/event-stream"
    assert answer.text.startswith(": ping\r\n\r\n")
    assert [event["result"]["content"][0]["text"] for event in _events(answer.text)] == ["quietly done"]


@pytest.mark.parametrize("meta", [{"progressToken": "p-1"}, {"progressToken": 7}, {}])
async def test_a_session_talking_call_is_answered_by_the_fast_path_as_by_the_sdk(served, monkeypatch, meta,
                                                                                 streamed_calls):
    """2025-11-25: a call of a tool that talks, in a session held here, is taken by the fast path and answered as
    the SDK answers it: the same notifications (progress with the request's token, the logs the session's level
    lets through) and result, as SSE, each message as the SDK frames it."""
    answers = []
    async with httpx.AsyncClient(base_url=served.url) as http:
        headers = await _session(http, {})
        await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel",
                                                       "params": {"level": "warning"}})
        for enabled in (True, False):
            monkeypatch.setattr(fast, "ENABLED", enabled)
            answer = await http.post("/mcp", headers=headers, json=_call(5, "steps", meta))
            answers.append((answer.status_code, answer.headers["mcp-session-id"], _events(answer.text)))
    assert streamed_calls == ["2025-11-25"]  # the first request's: the second was the SDK's
    assert answers[0] == answers[1]
    events = answers[0][2]
    assert [event.get("method") for event in events[:-1]] == ["notifications/progress"] * 3 * bool(meta) + [
        "notifications/message"]  # the warning: the info line is below the session's level
    assert events[-1]["id"] == 5 and events[-1]["result"]["content"][0]["text"] == "done"


async def test_an_answer_posted_on_another_session_never_reaches_the_question(served):
    """A question's answer is taken only from the session (and key) the call was made in: the same answer POSTed
    on another session goes to the SDK, which knows no such request, and the question still waits; on the
    call's own session it is the tool's answer."""
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        mine, other = await _session(http, {"elicitation": {}}), await _session(http, {"elicitation": {}})
        async with http.stream("POST", "/mcp", headers=mine, json=_call(1, "ask_user")) as answer:
            lines = answer.aiter_lines()
            question = await _next_event(lines)
            assert question["method"] == "elicitation/create"
            reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Eve"}}}
            elsewhere = await http.post("/mcp", headers=other, json=reply)
            assert elsewhere.status_code in (202, 400, 404)
            reply["result"]["content"]["name"] = "Ada"
            assert (await http.post("/mcp", headers=mine, json=reply)).status_code == 202
            results = await _rest(lines)
    assert results[-1]["result"]["content"][0]["text"] == "accept: {'name': 'Ada'}"


async def test_a_session_client_that_closes_its_stream_does_not_cancel_the_call(tmp_path: Path, streamed_calls):
    """2025-11-25: closing a call's stream is not a cancellation (the spec says so; ``notifications/cancelled``
    is): the tool runs on after the client left, and the session's cancellation then ends it."""
    (tmp_path / "tools.yaml").write_text(TOOLS)
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "talk_tools.py").write_text(textwrap.dedent(PYTHON))
    with running(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            headers = await _session(http, {})
            async with http.stream("POST", "/mcp", headers=headers, json=_call(1, "waits", {"progressToken": "w"})
                                   ) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        assert json.loads(line[5:])["params"]["message"] == "started"
                        break
            # The gateway has seen the disconnect once it answers the next request on the session.
            assert (await http.post("/mcp", headers=headers, json=_call(2, "plain"))).json()["result"]["isError"] is False
            assert not (tmp_path / "python" / "cancelled").exists()
            await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                           "params": {"requestId": 1}})
            await until_async(lambda: (tmp_path / "python" / "cancelled").exists(), "the tool's cancellation", 20)
    assert streamed_calls == ["2025-11-25"]


async def test_a_question_waiting_when_its_session_ends_ends_at_once(tmp_path: Path, streamed_calls):
    """A session deleted while its call waits for an answer: nobody can answer any more, so the question ends then
    with an error result the LLM can read, not at the tool's timeout (120 s)."""
    (tmp_path / "tools.yaml").write_text(TOOLS.replace("binding: {python: talk_tools:ask_user}",
                                                       "binding: {python: talk_tools:ask_user}\n    timeout_s: 120"))
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "talk_tools.py").write_text(textwrap.dedent(PYTHON))
    with running(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            headers = await _session(http, {"elicitation": {}})
            async with http.stream("POST", "/mcp", headers=headers, json=_call(1, "ask_user")) as answer:
                lines = answer.aiter_lines()
                assert (await _next_event(lines))["method"] == "elicitation/create"
                assert (await http.delete("/mcp", headers=headers)).status_code == 200
                results = await _rest(lines)
    assert results[-1]["result"]["isError"] is True
    assert results[-1]["result"]["content"][0]["text"] == (
        "The calling client cannot answer elicitation (its session ended before it answered).")
    assert streamed_calls == ["2025-11-25"]


@pytest.mark.parametrize("reply, said", [
    ({"error": {"code": -1, "message": "the user is away"}},
     "The calling client refused the elicitation request: the user is away"),
    ({"result": {"action": "maybe"}}, "The calling client's answer to elicitation is not valid MCP: action:"),
])
async def test_a_refused_or_malformed_answer_is_the_tools_error(served, reply, said):
    """A client answering a 2025-11-25 fast call's question with an error, or with what is not the result MCP
    defines for it: the tool's error result says which, as on the SDK's path."""
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        headers = await _session(http, {"elicitation": {}})
        async with http.stream("POST", "/mcp", headers=headers, json=_call(1, "ask_user")) as answer:
            lines = answer.aiter_lines()
            question = await _next_event(lines)
            posted = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": question["id"], **reply})
            assert posted.status_code == 202
            results = await _rest(lines)
    assert results[-1]["result"]["isError"] is True
    assert results[-1]["result"]["content"][0]["text"].startswith(said)
