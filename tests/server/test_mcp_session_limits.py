"""MCP 2025-11-25 sessions are bounded per API key and expire when idle, so one key cannot fill the session table
for everyone."""

from __future__ import annotations

import httpx
import pytest
from server_support import ADMIN_KEY, API_KEYS, READER_KEY
from support import until

from gateway.settings import SettingsInvalid, load_settings

LEGACY = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def initialize(url: str, key: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=INIT, headers=ACCEPT | {"Authorization": f"Bearer {key}"}, timeout=30)


def found(url: str, key: str, session: str) -> bool:
    listed = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30,
                        headers=ACCEPT | {"Authorization": f"Bearer {key}", "Mcp-Session-Id": session,
                                          "MCP-Protocol-Version": LEGACY})
    return listed.status_code != 404


def test_a_key_at_its_session_cap_is_refused_clearly_while_other_keys_still_open_sessions(start_server,
                                                                                          shared_examples):
    """A key holding mcp_sessions_per_key sessions gets 429 with a JSON-RPC error naming the cap and the setting
    that raises it; another key still opens a session."""
    served = start_server(shared_examples, api_keys=API_KEYS, mcp_sessions_per_key=2)
    assert [initialize(served.url, READER_KEY).status_code for _ in range(2)] == [200, 200]
    refused = initialize(served.url, READER_KEY)
    assert refused.status_code == 429
    message = refused.json()["error"]["message"]
    assert "2" in message and "mcp_sessions_per_key" in message and "DELETE" in message
    assert initialize(served.url, ADMIN_KEY).status_code == 200


def test_an_idle_session_is_closed_and_frees_its_place_under_the_cap(start_server, shared_examples):
    """A session unused for mcp_session_idle_s is closed (404 afterwards) and no longer counts against its key's
    cap."""
    served = start_server(shared_examples, api_keys=API_KEYS, mcp_sessions_per_key=1, mcp_session_idle_s=0.5)
    session = initialize(served.url, READER_KEY).headers["mcp-session-id"]
    assert initialize(served.url, READER_KEY).status_code == 429
    # Polled by opening (a refused initialize does not use the idle session, as a request naming it would).
    until(lambda: initialize(served.url, READER_KEY).status_code == 200, "the idle session to free its place")
    assert not found(served.url, READER_KEY, session)


@pytest.mark.parametrize(("name", "value"), [("mcp_sessions_per_key", "0"), ("mcp_session_idle_s", "inf"),
                                             ("mcp_session_idle_s", "-1")])
def test_a_session_limit_that_is_not_a_positive_finite_number_is_refused_naming_it(name, value):
    """A zero, negative or infinite session limit is a settings error naming the setting, not a server that
    refuses every session or never closes one."""
    with pytest.raises(SettingsInvalid, match=name):
        load_settings(None, {"TOOL_GATEWAY_" + name.upper(): value})
