"""An upstream MCP server that answers the gateway with an HTTP error status (401/403 with its WWW-Authenticate
challenge, 404, 5xx): `validate`, /status, `tool-gateway status` and a call's error result say which request, the
status, the challenge and what to do; refused credentials fail `validate`, a down upstream stays a warning; the
source's secrets appear nowhere. The upstream is a real server (``ts_sessions_http.py``, told to refuse)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp_upstreams import Upstream, free_port, gateway_serving, sources_yaml, until

from gateway.cli.status import report

TOKEN = "hunter2-token-value"  # the source's credential: it never appears in a message
CHALLENGE = f'Bearer error="invalid_token", error_description="The access token {TOKEN} expired"'


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def upstream():
    running = Upstream("ts_sessions_http.py").start()
    try:
        yield running
    finally:
        running.kill()


def refuse(upstream: Upstream, status: int | None, **headers: str) -> None:
    base = upstream.url.rpartition("/mcp")[0]
    httpx.post(f"{base}/refuse", json={"status": status, "headers": headers}, timeout=10).raise_for_status()


def definitions(tmp_path: Path, url: str) -> Path:
    root = tmp_path / "defs"
    root.mkdir(exist_ok=True)
    (root / "upstreams.yaml").write_text(sources_yaml(
        f"  - id: remote\n    mcp: {{url: '{url}?key=query-secret', connect_timeout_s: 3,"
        f" headers: {{Authorization: 'Bearer {TOKEN}'}}}}\n"))
    return root


def validate(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "validate", str(root)], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("status", [401, 403])
def test_validate_fails_on_refused_credentials_saying_what_happened(tmp_path, upstream, status):
    refuse(upstream, status, **{"WWW-Authenticate": CHALLENGE})
    done = validate(definitions(tmp_path, upstream.url))
    assert done.returncode == 1, (done.stdout, done.stderr)
    said = done.stdout + done.stderr
    assert f"its initialize to {upstream.url} was answered HTTP {status}" in said, said
    assert "(invalid_token: The access token [redacted] expired)" in said
    assert "check the source's headers/credentials" in said
    assert "error: source 'remote' refused the gateway's credentials" in said
    assert TOKEN not in said and "query-secret" not in said


@pytest.mark.parametrize(("status", "words"), [(404, "HTTP 404 Not Found"), (503, "HTTP 503 Service Unavailable")])
def test_validate_warns_of_a_missing_or_failing_upstream_and_exits_zero(tmp_path, upstream, status, words):
    refuse(upstream, status)
    done = validate(definitions(tmp_path, upstream.url))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert f"its initialize to {upstream.url} was answered {words}" in done.stderr, done.stderr
    assert ("check the source's url" if status == 404 else "failed on its side") in done.stderr


def test_validate_warns_of_a_down_upstream_and_exits_zero(tmp_path):
    done = validate(definitions(tmp_path, f"http://127.0.0.1:{free_port()}/mcp"))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "is unreachable: could not connect" in done.stderr


def test_status_and_calls_say_the_upstream_refused_the_credentials(tmp_path, upstream):
    """Refused at start-up: /status, the console's overview and `tool-gateway status` say so. Accepted, then
    refused mid-session (a revoked token): the call's error result says which request and what to do."""
    refuse(upstream, 401, **{"WWW-Authenticate": CHALLENGE})
    with gateway_serving(definitions(tmp_path, upstream.url)) as served:
        body = httpx.get(f"{served.url}/status", timeout=10).json()
        source = {s["id"]: s for s in body["sources"]}["remote"]
        assert source["health"] == "down" and source["http_status"] == 401, source
        assert f"its initialize to {upstream.url} was answered HTTP 401 Unauthorized" in source["error"]
        lines, _ = report(body, served.url, cluster=False)
        assert any(line.startswith("source remote (mcp): down: ") and "HTTP 401" in line for line in lines), lines
        console = httpx.get(f"{served.url}/admin/api/overview", timeout=10).json()  # loopback, auth off
        assert [s["error"] for s in console["sources"]] == [source["error"]]

        refuse(upstream, None)
        until(lambda: "echo" in served.gateway.catalog.tools, "the upstream's tools once it accepts the gateway")
        refuse(upstream, 401, **{"WWW-Authenticate": CHALLENGE})
        answer = httpx.post(f"{served.url}/tools/echo/call", json={"text": "hi"}, timeout=30).json()
        assert answer["is_error"], answer
        assert f"refused the gateway: its tools/call to {upstream.url} was answered HTTP 401 Unauthorized " \
               "(invalid_token: The access token [redacted] expired): check the source's headers/credentials" \
               in answer["text"], answer["text"]
        assert TOKEN not in str(body) + str(answer) and "query-secret" not in str(body) + str(answer)
