"""``gateway.runtime.bridge_cluster`` in memory mode: two gateways of one process sharing one ``MemoryState`` stand for
two replicas; a scripted page answers the frames its session receives (the real-browser, real-Redis version is
tests/cluster/test_cluster_bridge.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from support import EXAMPLES, until_async

from gateway.context import CallContext
from gateway.errors import ToolError
from gateway.runtime.bridge import Bridge, Session
from gateway.runtime.bridge_cluster import RECORDS, ClusterBridge, bridging
from gateway.runtime.cluster import replicating
from gateway.runtime.gateway import Gateway
from gateway.settings import Settings
from gateway.state.memory import MemoryState

HEARTBEAT_S = 0.2


@asynccontextmanager
async def replicas(count: int = 2) -> AsyncIterator[list[Gateway]]:
    """``count`` gateways sharing one in-memory state, each with its registry and cross-replica bridge running."""
    state = MemoryState()
    gateways = []
    async with AsyncExitStack() as stack:
        for _ in range(count):
            gateway = Gateway(Settings(definitions=EXAMPLES, reload=False, cluster={"heartbeat_s": HEARTBEAT_S}))
            gateway.state = state
            gateway.bridge = ClusterBridge(gateway, Bridge())
            await stack.enter_async_context(replicating(gateway))
            await stack.enter_async_context(bridging(gateway))
            gateways.append(gateway)
        await until_async(lambda: all(g.bridge.listening for g in gateways), "every bridge listening", timeout=10,
                          step=0.01)
        yield gateways


@asynccontextmanager
async def page(gateway: Gateway, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> AsyncIterator[Session]:
    """A page connected to ``gateway``'s bridge that answers each call frame with ``answer(frame)``."""
    cluster: ClusterBridge = gateway.bridge
    session = cluster.local.connect("127.0.0.1")
    await cluster.opened(session)

    async def run() -> None:
        while True:
            frame = json.loads(await session.outbox.get())
            if frame["type"] == "call":
                cluster.local.receive(session, json.dumps({"id": frame["id"], **answer(frame)}))

    task = asyncio.create_task(run())
    try:
        yield session
    finally:
        task.cancel()
        cluster.local.disconnect(session)
        await cluster.closed(session)


def echo(frame: dict[str, Any]) -> dict[str, Any]:
    return {"type": "result", "value": {"input": json.loads(frame["input"]), "user": frame["context"]["user"]}}


async def test_a_session_is_registered_while_open_and_forgotten_when_closed():
    """Opening a page writes bridge:<session> → its replica's id, renewed past its TTL; closing deletes it."""
    async with replicas(1) as (a,):
        async with page(a, echo) as session:
            await asyncio.sleep(3 * 3 * HEARTBEAT_S)  # past the record's TTL: only renewal keeps it
            owner = await a.state.get(RECORDS + session.id)
        gone = await a.state.get(RECORDS + session.id)

    assert owner == a.replicas.id.encode()
    assert gone is None


async def test_a_call_for_a_page_on_another_replica_is_forwarded_and_answered():
    """A call made on B for a page connected to A runs in that page, with its arguments and context, and B gets
    its value."""
    async with replicas() as (a, b), page(a, echo) as session:
        value = await b.bridge.execute(session.id, "example-tool", {"exampleParam": "x"}, CallContext(user="ann"))

    assert value == {"input": {"exampleParam": "x"}, "user": "ann"}


async def test_a_page_error_comes_back_to_the_calling_replica():
    """The page's error on A is B's ToolError, with the page's message."""
    def fail(frame: dict[str, Any]) -> dict[str, Any]:
        return {"type": "error", "message": "form not found"}

    async with replicas() as (a, b), page(a, fail) as session:
        with pytest.raises(ToolError, match="failed in the browser: form not found"):
            await b.bridge.execute(session.id, "example-tool", {}, CallContext())


async def test_a_session_no_replica_holds_fails_at_once_with_a_clear_error():
    """An unknown session id is 'not connected to any replica', and the message shows only its first characters."""
    async with replicas() as (_, b):
        with pytest.raises(ToolError, match="not connected to any replica") as raised:
            await b.bridge.execute("S3cretSessionIdThatNobodyHolds", "example-tool", {}, CallContext())

    assert "S3cretSessionIdThatNobodyHolds" not in str(raised.value)


async def test_a_record_whose_replica_stopped_listening_fails_at_once():
    """A record left by a replica that died (nobody hears its channel) fails the call at once, not at its timeout."""
    async with replicas() as (_, b):
        await b.state.put(RECORDS + "orphan-session-id", b"replica-that-died", 60)
        with pytest.raises(ToolError, match="not connected to any replica"):
            await asyncio.wait_for(b.bridge.execute("orphan-session-id", "example-tool", {}, CallContext()), 5)


async def test_a_stopped_replicas_sessions_expire():
    """When A stops renewing (its process gone), its session's record expires and B's call fails at once."""
    async with replicas() as (a, b):
        session = a.bridge.local.connect("127.0.0.1")
        await a.bridge.opened(session)
        for task in asyncio.all_tasks():  # renewal stops, as when A's process dies
            if task.get_name() == "bridge-renew":
                task.cancel()
        async with asyncio.timeout(10):  # a bound: the record lives 3 heartbeats
            while await b.state.get(RECORDS + session.id) is not None:
                await asyncio.sleep(0.05)
        with pytest.raises(ToolError, match="not connected to any replica"):
            await b.bridge.execute(session.id, "example-tool", {}, CallContext())


async def test_a_replica_that_cannot_listen_refuses_to_forward_at_once():
    """While B is not subscribed to its channel (the store dropped it), a call to forward fails at once."""
    async with replicas() as (a, b), page(a, echo) as session:
        b.bridge.listening = False
        with pytest.raises(ToolError, match="cannot hear its answer now"):
            await b.bridge.execute(session.id, "example-tool", {}, CallContext())


async def test_a_local_session_never_needs_the_shared_state():
    """A call for a page on the same replica runs on its local bridge, even if the registry lost its record."""
    async with replicas(1) as (a,), page(a, echo) as session:
        await a.state.delete(RECORDS + session.id)
        value = await a.bridge.execute(session.id, "example-tool", {"exampleParam": "y"}, CallContext())

    assert value["input"] == {"exampleParam": "y"}


async def test_a_bug_on_the_owning_replica_still_answers_the_caller(monkeypatch):
    """An unexpected exception while A runs a forwarded call is answered to B as an error at once (B does not wait
    for its timeout)."""
    async with replicas() as (a, b), page(a, echo) as session:
        async def broken(*args: Any) -> Any:
            raise RuntimeError("a bug")

        monkeypatch.setattr(a.bridge.local, "execute", broken)
        with pytest.raises(ToolError, match="failed on the replica holding its browser page"):
            await asyncio.wait_for(b.bridge.execute(session.id, "example-tool", {}, CallContext()), 10)
