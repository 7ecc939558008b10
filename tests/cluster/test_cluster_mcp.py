"""MCP 2025-11-25 sessions through nginx in front of 3 replicas: one session, any replica, nothing sticky."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import httpx
from cluster_support import (
    CLUSTER_TOOLS,
    SESSION_HEADERS,
    Cluster,
    Seen,
    http_client,
    open_session,
    session_request,
)
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ToolListChangedNotification
from support import until_async

PAUSE_EDITED = CLUSTER_TOOLS + """\
  - id: added_after_start
    name: Added after start
    user_description: Added by an edit.
    ai_description: Added by an edit of the definitions.
    binding:
      python: cluster_tools:pause
"""


async def test_one_session_is_served_by_every_replica_and_hears_list_changed(cluster: Cluster) -> None:
    """The official client keeps one 2025-11-25 session while nginx spreads its 30 calls over all three replicas,
    with no failure; after an edit of the definitions it hears tools/list_changed on its GET stream (whichever
    replica holds it) and lists the new tool."""
    seen = Seen()
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    async with http_client(cluster, seen) as http, \
            streamable_http_client(f"{cluster.url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write, message_handler=on_message) as session:
        await session.initialize()
        results = [await session.call_tool("sum", {"a": n, "b": 1}) for n in range(30)]
        assert [r.structured_content for r in results] == [{"result": n + 1} for n in range(30)]
        assert not any(r.is_error for r in results)
        posts = Counter(replica for method, replica in seen.replicas if method == "POST")
        assert set(posts) == set(cluster.ids.values())  # every replica answered calls of the one session
        assert len(seen.sessions) == 1 and not seen.failures

        # The GET stream opens in the background after the handshake; wait until a replica answered it.
        await until_async(lambda: any(method == "GET" for method, _ in seen.replicas), "the GET stream")
        cluster.edit_definitions("cluster.yaml", PAUSE_EDITED)
        try:
            await until_async(lambda: heard, "tools/list_changed after the edit")
            await until_async(cluster.same_version, "every replica on the edited catalog", step=0.1)
            listed = {tool.name for tool in (await session.list_tools()).tools}
            assert "added_after_start" in listed
        finally:  # the session's cluster serves the next tests as it was
            cluster.edit_definitions("cluster.yaml", CLUSTER_TOOLS)
    assert len(seen.sessions) == 1 and not seen.failures


def test_a_session_deleted_through_another_replica_is_gone_everywhere(cluster: Cluster) -> None:
    """DELETE of a session on a replica that does not hold it ends it: the next request naming it is a 404 on
    every replica (the SDK's answer for an unknown session)."""
    session_id, holder = anyio.run(open_session, cluster)
    ports = {replica: port for port, replica in cluster.ids.items()}
    other = next(port for replica, port in ports.items() if replica != holder)
    assert session_request(cluster, "POST", other, session_id).status_code == 200
    deleted = session_request(cluster, "DELETE", other, session_id)
    assert deleted.status_code == 200, deleted.text
    cluster.wait_until(lambda: [session_request(cluster, "POST", port, session_id).status_code
                                for port in ports.values()] == [404, 404, 404], 10, "the session gone everywhere")


def test_an_unknown_session_is_the_sdks_404(cluster: Cluster) -> None:
    """A session id no replica ever issued is answered 404 "Session not found", as by one process."""
    response = session_request(cluster, "POST", next(iter(cluster.ids)), "0" * 32)
    assert response.status_code == 404 and "Session not found" in response.text


def test_a_get_stream_on_a_replica_that_does_not_hold_the_session_hears_list_changed(cluster: Cluster) -> None:
    """The session's GET stream opened on a replica that does not hold the session stays there, hears
    tools/list_changed after an edit, and ends when the session is deleted (through yet another replica)."""
    session_id, holder = anyio.run(open_session, cluster)
    others = [port for port, replica in cluster.ids.items() if replica != holder]
    headers = {**cluster.headers(), **SESSION_HEADERS, "accept": "text/event-stream", "mcp-session-id": session_id}
    lines: list[str] = []
    with httpx.stream("GET", f"http://127.0.0.1:{others[0]}/mcp", headers=headers, timeout=30) as stream:
        assert stream.status_code == 200
        cluster.edit_definitions("cluster.yaml", PAUSE_EDITED)
        events = stream.iter_lines()
        try:
            for line in events:
                lines.append(line)
                if "notifications/tools/list_changed" in line:
                    break
            assert session_request(cluster, "DELETE", others[1], session_id).status_code == 200
            lines += list(events)  # the stream ends: the replica closed it
        finally:
            cluster.edit_definitions("cluster.yaml", CLUSTER_TOOLS)
    assert any("notifications/tools/list_changed" in line for line in lines)
