"""Redis stopped and started again under a running cluster: what needs no shared state keeps working, what needs
it fails at once with an error naming it, and everything works again by itself once Redis is back."""

from __future__ import annotations

import anyio
import httpx
import httpx2
from cluster_support import (
    Cluster,
    Seen,
    follow_up,
    handed_back,
    http_client,
    open_session,
    rest_call,
    session_request,
)
from fake_llm import Reply
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client


async def modern_calls(cluster: Cluster) -> None:
    """Three 2026-07-28 calls through nginx with the SDK's Client (stateless: no shared state needed)."""
    async with httpx2.AsyncClient(headers=cluster.headers(), timeout=30) as http, \
            Client(streamable_http_client(f"{cluster.url}/mcp", http_client=http)) as modern:
        assert modern.protocol_version == "2026-07-28"
        for n in range(3):
            assert (await modern.call_tool("sum", {"a": n, "b": 1})).structured_content == {"result": n + 1}


async def session_over_every_replica(cluster: Cluster) -> None:
    """A new 2025-11-25 session whose six calls reach all three replicas without a failure."""
    seen = Seen()
    async with http_client(cluster, seen) as http, \
            streamable_http_client(f"{cluster.url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        for n in range(6):
            assert (await session.call_tool("sum", {"a": n, "b": 1})).structured_content == {"result": n + 1}
    assert len({replica for method, replica in seen.replicas if method == "POST"}) == 3 and not seen.failures


def test_redis_down_fails_only_what_needs_it_and_recovery_is_automatic(cluster: Cluster) -> None:
    """With Redis stopped: REST calls and 2026-07-28 MCP calls through nginx succeed, a 2025-11-25 session keeps
    working on the replica that holds it, while on another replica it is a 503 JSON-RPC error naming the shared
    state, as is a chat follow-up (OpenAI's error shape); /healthz stays ok and /status says degraded. Once Redis
    is started again (empty), /status is ok, the session opened before is served by every replica again, and a new
    session and a chat turn work across replicas."""
    session_id, holder = anyio.run(open_session, cluster)
    ports = {replica: port for port, replica in cluster.ids.items()}
    other = next(port for replica, port in ports.items() if replica != holder)
    _, message = handed_back(cluster)
    cluster.redis.stop()

    with httpx.Client(base_url=cluster.url, headers=cluster.headers(), timeout=10) as client:
        assert [rest_call(client, "sum", {"a": n, "b": 1}).json()["result"] for n in range(6)] == \
            [n + 1 for n in range(6)]
    anyio.run(modern_calls, cluster)

    held = session_request(cluster, "POST", ports[holder], session_id)
    assert held.json()["result"]["structuredContent"] == {"result": 3}
    refused = session_request(cluster, "POST", other, session_id)
    assert refused.status_code == 503
    assert "shared state" in refused.json()["error"]["message"]

    chat = httpx.post(f"{cluster.url}/v1/chat/completions", headers=cluster.headers(), timeout=30,
                      json=follow_up(message))
    assert chat.status_code == 503
    error = chat.json()["error"]
    assert error["code"] == "shared_state_unavailable" and error["type"] == "server_error"
    assert "shared state" in error["message"]

    for replica in cluster.replicas:
        assert httpx.get(f"{replica.url}/healthz", timeout=10).json() == {"status": "ok"}
    status = httpx.get(f"{cluster.url}/status", headers=cluster.headers(admin=True), timeout=10).json()
    assert status["status"] == "degraded" and status["cluster"]["degraded"]
    assert "Redis" in status["cluster"]["reason"]
    public = httpx.get(f"{cluster.url}/status", headers=cluster.headers(), timeout=10).json()
    assert public["cluster"] == {"mode": "redis", "degraded": True, "same_version": None}

    cluster.redis.start()

    def all_well() -> bool:
        answers = [httpx.get(f"{r.url}/status", headers=cluster.headers(admin=True), timeout=10).json()
                   for r in cluster.replicas]
        return all(a["status"] == "ok" and len(a["cluster"]["replicas"]) == 3 for a in answers)

    cluster.wait_until(all_well, what="every replica ok again, all three registered")
    # Redis came back empty (no persistence): the holder stores its sessions' records again, so the session
    # opened before the outage is served by every replica once more.
    cluster.wait_until(lambda: session_request(cluster, "POST", other, session_id).status_code == 200, 10,
                       "the session served by another replica again")
    anyio.run(session_over_every_replica, cluster)
    cluster.llm.reset()
    first, message = handed_back(cluster)
    again = next(port for port, replica in cluster.ids.items() if replica != cluster.replica(first))
    cluster.llm.answer(Reply(content="Done."))
    second = httpx.post(f"http://127.0.0.1:{again}/v1/chat/completions", headers=cluster.headers(), timeout=30,
                        json=follow_up(message))
    assert second.status_code == 200 and second.json()["choices"][0]["message"]["content"] == "Done."
