"""Checking a draft never starts an upstream's process or fetches its document (issue 23 item 1): any admin key —
and, with auth off, the console token — may send a draft, and a draft declaring an MCP source with ``command:``
once ran that command as the gateway's user. A check reads the declaration statically and shows the tools the
running gateway last listed for the same upstream settings."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from mcp_upstreams import STDIO_SERVER, gateway_serving, sources_yaml

from gateway.settings import ApiKey, hash_key

ADMIN_KEY = "admin-key-for-draft-checks"
API_KEYS = (ApiKey("admin", hash_key(ADMIN_KEY), admin=True),)
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
NOT_READ = "not read by a check"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


def check(url: str, path: str, text: str) -> dict:
    answer = httpx.post(f"{url}/admin/api/check", json={"path": path, "text": text}, headers=ADMIN, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def messages(checked: dict) -> list[str]:
    return [problem["message"] for problem in checked["problems"]]


def test_a_draft_mcp_source_command_is_never_run_by_a_check(tmp_path):
    """With an admin key, a draft whose MCP source would create a file when started: the check answers (a warning
    that the source is read when saved, not an error) and the file is never made. A declaration that is wrong as
    written is still an error at its place."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "tools.yaml").write_text("tools: []\n")
    marker = tmp_path / "ran"
    draft = sources_yaml(f"  - id: planted\n    mcp: {{command: sh, args: ['-c', 'touch {marker}'], "
                         "connect_timeout_s: 5}\n")
    with gateway_serving(root, api_keys=API_KEYS) as served:
        checked = check(served.url, "tools.yaml", draft)
        broken = check(served.url, "tools.yaml", sources_yaml("  - id: planted\n    mcp: {connect_timeout_s: 5}\n"))
    assert not marker.exists()
    assert checked["ok"] is True and any(NOT_READ in m and "'planted'" in m for m in messages(checked))
    assert broken["ok"] is False and any(p["line"] == 3 and "sources[0].mcp" in p["message"]
                                         for p in broken["problems"])


def test_a_draft_openapi_url_is_never_fetched_by_a_check(tmp_path):
    """A draft naming an OpenAPI document by URL: the server at that URL sees no request during the check."""
    hits: list[str] = []

    class Counting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    root = tmp_path / "defs"
    root.mkdir()
    (root / "tools.yaml").write_text("tools: []\n")
    draft = sources_yaml(f"  - id: api\n    openapi: {{url: 'http://127.0.0.1:{upstream.server_port}/openapi.json'}}\n")
    try:
        with gateway_serving(root, api_keys=API_KEYS) as served:
            checked = check(served.url, "tools.yaml", draft)
    finally:
        upstream.shutdown()
    assert hits == []
    assert checked["ok"] is True and any(NOT_READ in m and "'api'" in m for m in messages(checked))


def test_a_draft_naming_a_served_upstream_is_checked_with_its_listed_tools(tmp_path):
    """A draft that keeps the served stdio upstream's settings but renames its tools (a prefix, an override of a
    renamed tool) is checked against the tools the gateway listed: no warning, and an override naming a tool the
    upstream does not list is still an error."""
    root = tmp_path / "defs"
    root.mkdir()
    upstream = f"mcp: {{command: '{sys.executable}', args: ['{STDIO_SERVER}'], connect_timeout_s: 20}}"
    (root / "local.yaml").write_text(sources_yaml(f"  - id: local\n    {upstream}\n"))
    with gateway_serving(root, api_keys=API_KEYS) as served:
        assert "whoami" in served.gateway.catalog.tools
        renamed = check(served.url, "local.yaml", sources_yaml(
            f"  - id: local\n    {upstream}\n    prefix: l_\n    tools: {{whoami: {{name: Who am I}}}}\n"))
        unknown = check(served.url, "local.yaml", sources_yaml(
            f"  - id: local\n    {upstream}\n    tools: {{nobody_lists_this: {{name: Nothing}}}}\n"))
    assert renamed == {"ok": True, "problems": []}
    assert any("nobody_lists_this" in m for m in messages(unknown))
