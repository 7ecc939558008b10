"""``tool-gateway serve`` as users run it: a subprocess, its start-up lines, where it listens, how it fails."""

from __future__ import annotations

import subprocess
import sys

import httpx
from support import free_port
from support import serve_process as serve


def test_without_keys_serve_binds_loopback_even_when_asked_for_all_interfaces(examples_dir):
    """With no API keys, --host 0.0.0.0 is overridden to 127.0.0.1, and the log says so and why."""
    log = serve(examples_dir, "--host", "0.0.0.0")
    assert "auth off: no API keys configured, so listening on 127.0.0.1 instead of 0.0.0.0" in log
    assert "serving 12 tool(s)" in log and "MCP at /mcp" in log


def test_with_a_key_serve_says_auth_is_on_and_requires_it(examples_dir):
    """A key from the environment turns auth on: the start-up line says so, and listings need the key."""
    def check(url: str) -> None:
        assert httpx.get(f"{url}/tools").status_code == 401
        assert httpx.get(f"{url}/tools", headers={"Authorization": "Bearer serve-test-key"}).status_code == 200

    log = serve(examples_dir, env={"TOOL_GATEWAY_API_KEY": "serve-test-key"}, while_running=check)
    assert "auth on: 1 API key(s) configured" in log and "serve-test-key" not in log


def test_invalid_definitions_stop_serve_with_every_problem(write_definitions):
    """serve refuses to start on invalid definitions: exit code 1 and each problem as file:line:col."""
    root = write_definitions({"bad.yaml": """
        tools:
          - id: one
            name: One
            user_description: x
            ai_description: x
            binding: {python: "nowhere:nothing"}
          - id: 'two words'
            name: Two
            user_description: x
            ai_description: x
            binding: {python: "nowhere:nothing"}
        """})
    done = subprocess.run([sys.executable, "-m", "gateway", "serve", str(root), "--port", str(free_port())],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("bad.yaml:")]
    assert len(lines) >= 2 and any(line.startswith("bad.yaml:7:") for line in lines), done.stderr
    assert "Traceback" not in done.stderr
