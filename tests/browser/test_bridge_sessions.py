"""``gateway.bridge`` on its own: the frames it exchanges with a page, and what it does with odd answers."""

from __future__ import annotations

import asyncio
import json

import pytest
from support import serving
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from gateway.context import CallContext
from gateway.errors import ToolError
from gateway.invoke import json_value
from gateway.runtime.bridge import Bridge, TooManySessions
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings


def frames(session) -> list[dict]:
    out = []
    while not session.outbox.empty():
        out.append(json.loads(session.outbox.get_nowait()))
    return out


@pytest.mark.parametrize(("value", "expected"), [
    ('"x answered"', "x answered"),  # the seed's JSON.stringify(result)
    ('{"a": [1, 2]}', {"a": [1, 2]}),
    ("x answered", "x answered"),  # not JSON: stays the string it is
    ({"a": 1}, {"a": 1}),
    (None, None),
])
def test_page_value_reads_json_strings_as_json(value, expected):
    """A handler's string holding JSON is that JSON value; any other value is kept as it is."""
    assert json_value(value) == expected


async def test_call_frame_carries_the_json_arguments_and_context_and_the_answer_resolves_it():
    """execute() posts one call frame (input as a JSON string, the call's context) and returns the page's value."""
    bridge = Bridge()
    session = bridge.connect()
    context = CallContext(conversation_id="c-1", user="ann", tool_call_id="t-1")
    call = asyncio.create_task(bridge.execute(session.id, "example-tool", {"exampleParam": "x"}, context))
    await asyncio.sleep(0)

    hello, sent = frames(session)
    bridge.receive(session, json.dumps({"type": "result", "id": sent["id"], "value": '"x answered"'}))

    assert hello == {"type": "session", "session": session.id}
    assert sent == {"type": "call", "id": sent["id"], "tool": "example-tool", "input": '{"exampleParam": "x"}',
                    "context": {"conversation_id": "c-1", "user": "ann", "tool_call_id": "t-1"}}
    assert await call == "x answered"
    assert session.pending == {}


async def test_frames_that_answer_no_pending_call_are_dropped():
    """Junk, unknown ids and second answers change nothing; the pending call still takes its own answer."""
    bridge = Bridge()
    session = bridge.connect()
    call = asyncio.create_task(bridge.execute(session.id, "t", {}, CallContext()))
    await asyncio.sleep(0)
    call_id = frames(session)[-1]["id"]

    for junk in ["not json", "[1]", '{"type": "hello"}', '{"type": "result", "id": "other", "value": 1}']:
        bridge.receive(session, junk)
    assert not call.done()
    bridge.receive(session, json.dumps({"type": "error", "id": call_id, "message": "boom"}))
    bridge.receive(session, json.dumps({"type": "result", "id": call_id, "value": 2}))

    with pytest.raises(ToolError, match=r"^Tool 't' failed in the browser: boom$"):
        await call


async def test_disconnect_fails_pending_calls_and_forgets_the_session():
    """A page going away fails each pending call with a ToolError and its session id stops resolving."""
    bridge = Bridge()
    session = bridge.connect()
    calls = [asyncio.create_task(bridge.execute(session.id, tool, {}, CallContext())) for tool in ("a", "b")]
    await asyncio.sleep(0)

    bridge.disconnect(session)

    for tool, call in zip(("a", "b"), calls):
        with pytest.raises(ToolError, match=f"^Tool '{tool}' did not finish: the browser page running it disconnected"):
            await call
    with pytest.raises(ToolError, match="no open page holds the browser session"):
        await bridge.execute(session.id, "a", {}, CallContext())
    assert len(bridge) == 0


async def test_cancelled_call_leaves_nothing_pending():
    """A call cancelled by its timeout is forgotten, so the page's late answer finds nothing to resolve."""
    bridge = Bridge()
    session = bridge.connect()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await bridge.execute(session.id, "slow", {}, CallContext())

    assert session.pending == {}
    bridge.receive(session, json.dumps({"type": "result", "id": frames(session)[-1]["id"], "value": 1}))


def test_sessions_beyond_the_limit_are_refused():
    """Past max_sessions, connect() refuses instead of growing without bound."""
    bridge = Bridge(max_sessions=2)
    bridge.connect()
    bridge.connect()

    with pytest.raises(TooManySessions):
        bridge.connect()


def test_one_client_address_cannot_take_every_session():
    """Past max_per_client sessions from one address, connect() refuses that address only; a disconnect frees
    its slot."""
    bridge = Bridge(max_per_client=2)
    first = bridge.connect("203.0.113.7")
    bridge.connect("203.0.113.7")
    with pytest.raises(TooManySessions, match="203.0.113.7"):
        bridge.connect("203.0.113.7")
    bridge.connect("198.51.100.1")
    bridge.disconnect(first)
    bridge.connect("203.0.113.7")
    assert len(bridge) == 3


async def test_the_bridge_endpoint_refuses_sessions_over_the_per_client_cap_saying_why(examples_dir):
    """Over a real WebSocket, the session beyond the bridge_sessions_per_client setting is closed with 1013 and a
    reason naming the cap; closing one session lets the client open another."""
    gateway = Gateway(Settings(definitions=examples_dir, reload=False, bridge_sessions_per_client=2))
    with serving(create_app(gateway), lifespan="on") as server:
        url = server.url.replace("http", "ws") + "/client/bridge"
        async with connect(url) as one, connect(url):
            assert '"type":"session"' in await one.recv()
            async with connect(url) as refused:
                with pytest.raises(ConnectionClosed):
                    await refused.recv()
            assert refused.close_code == 1013 and "per client address" in refused.close_reason
        async with connect(url) as again:
            assert '"type":"session"' in await again.recv()
