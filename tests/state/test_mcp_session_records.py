"""MCP 2025-11-25 session records in a real Redis, as two in-process replicas share them: a record of the wrong
shape is a missing session (404, logged once), never a 500; a replica re-publishes the records it holds when
Redis comes back empty."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from support import EXAMPLES, running

LEGACY = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}
SUM = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}}


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    target = tmp_path / "tool-definitions"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def replicas(definitions: Path, redis_server) -> Iterator[tuple[str, str]]:
    """Two gateways sharing ``redis_server`` (heartbeat every 0.2 s): their URLs."""
    cluster = {"redis_url": redis_server.url, "heartbeat_s": 0.2}
    with running(definitions, cluster=cluster) as a, running(definitions, cluster=cluster) as b:
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
