"""MCP 2025-11-25 session records in a real Redis, as two in-process replicas share them: a record of the wrong
shape is a missing session (404, logged once), never a 500; a replica re-publishes the records it holds when
Redis comes back empty."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from support import running, until

LEGACY = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}
SUM = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}}


@pytest.fixture
def replicas(examples_dir: Path, redis_server) -> Iterator[tuple[str, str]]:
    """Two gateways sharing ``redis_server`` (heartbeat every 0.2 s): their URLs."""
    cluster = {"redis_url": redis_server.url, "heartbeat_s": 0.2}
    with running(examples_dir, cluster=cluster) as a, running(examples_dir, cluster=cluster) as b:
        yield a.url, b.url


def open_session(url: str) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    session = httpx.post(f"{url}/mcp", json=init, headers=ACCEPT, timeout=30).headers["mcp-session-id"]
    httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
               headers=ACCEPT | {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}, timeout=30)
    return session


def call(url: str, session: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=SUM, timeout=30,
                      headers=ACCEPT | {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY})


def answered(url: str, session: str) -> httpx.Response | None:
    """The call's answer, or None while the session is not found (404) or the store is down (503)."""
    answer = call(url, session)
    return None if answer.status_code in (404, 503) else answer


@pytest.mark.parametrize("stored", [b"{not json", b"[1, 2]", b"\xff\xfe", b'{"owner": null}'],
                         ids=["not JSON", "a list", "not UTF-8", "no fields"])
def test_a_session_record_of_the_wrong_shape_is_not_found_never_a_500(replicas, redis_server, stored, caplog):
    """A session record another writer left in a shape the gateway never writes is answered 404 'Session not
    found' on every request (never a 500), and logged once, not per request."""
    _, url = replicas
    redis.Redis.from_url(redis_server.url).set("tool-gateway:mcp-session:corrupt-session-id", stored, ex=60)
    with caplog.at_level(logging.WARNING, logger="gateway.mcp"):
        answers = [call(url, "corrupt-session-id") for _ in range(3)]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert answers[0].json()["error"]["message"] == "Session not found"
    assert len([r for r in caplog.records if "wrong shape" in r.getMessage()]) == 1


def test_a_session_held_by_one_replica_is_served_by_another_after_redis_restarts_empty(replicas, redis_server):
    """After Redis restarts without persistence, the replica holding a session stores its record again on its
    own (no request to it needed), so a call through the other replica is answered, not 404."""
    a, b = replicas
    session = open_session(a)
    assert call(b, session).status_code == 200
    redis_server.stop()
    redis_server.start()  # the same port, no data
    answer = until(lambda: answered(b, session), "the holding replica to store the session's record again")
    assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", "")


def test_a_holding_replica_stores_its_records_again_when_the_store_loses_them_without_a_restart(replicas,
                                                                                                 redis_server):
    """When the store loses a held session's record while every connection stays up (FLUSHALL, eviction), the
    holding replica notices on its next check and stores it again, so the other replica answers, not 404."""
    a, b = replicas
    session = open_session(a)
    redis.Redis.from_url(redis_server.url).flushall()
    answer = until(lambda: answered(b, session), "the holding replica to store the session's record again",
                   timeout=15)
    assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", "")


@pytest.mark.parametrize("stored", [b"{not json", b"[1]", b'{"id": 5}'], ids=["not JSON", "a list", "wrong fields"])
def test_a_replica_record_of_the_wrong_shape_is_left_out_of_status_never_a_500(replicas, redis_server, stored):
    """A replica-registry record another writer left in a shape no replica writes is left out of /status's list
    of replicas, which still lists the live ones (never a 500)."""
    a, _ = replicas
    redis.Redis.from_url(redis_server.url).set("tool-gateway:replica:bogus", stored, ex=60)
    status = httpx.get(f"{a}/status", timeout=30)
    assert status.status_code == 200
    listed = status.json()["cluster"]["replicas"]
    assert len(listed) == 2 and all(isinstance(r["id"], str) for r in listed)
