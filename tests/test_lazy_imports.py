"""What ``tool-gateway serve`` imports before it answers: not the parts a catalog without them never uses.

The MCP client side of the SDK is imported only for a definitions directory that declares an ``mcp:`` source,
the LLM provider clients only where the settings configure a provider, and nothing imports ``rich`` (httpx's
command-line client). The checks run in a fresh interpreter (``sys.modules`` of this test process holds whatever
other tests imported), and against ``serve`` itself, so that a new import anywhere on its path is caught.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import EXAMPLES, free_port

# Modules (and their submodules) a gateway serving the shipped examples over REST must not have imported.
NOT_FOR_SERVING = (
    "mcp.client",  # the SDK's client side
    "gateway.upstream.mcp.client",
    "gateway.upstream.mcp.connection",
    "gateway.upstream.mcp.calls",
    "gateway.upstream.mcp.watch",
    "gateway.upstream.mcp.refusals",
    "gateway.sources.mcp",
    "gateway.bindings.mcp",
    "gateway.loop.providers",  # LLM provider clients: none is configured
    "rich",  # httpx's command-line client imports it
    "gateway.search.index",  # tool search's ranking (and numpy under it): imported by the first search
    "numpy",
)
# Importing the package as a library leaves httpx alone (only the CLI, owning its process, keeps httpx's own CLI out).
NOT_FOR_AN_APP = tuple(name for name in NOT_FOR_SERVING if name != "rich")

# Runs `tool-gateway serve` in the main thread as the CLI does; a thread waits for /healthz, lists the tools and
# calls one over REST, writes the names of the imported modules to argv[2], then stops the server with SIGINT.
SERVE_AND_REPORT = textwrap.dedent('''
    import json, os, signal, sys, threading, time, urllib.request
    from gateway.cli.main import main

    definitions, report, port = sys.argv[1], sys.argv[2], sys.argv[3]
    base = f"http://127.0.0.1:{port}"

    def fetch(path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())

    def probe():
        try:
            # Bounded by the run's timeout, not by a count of polls: on a loaded machine start-up took over the
            # 30 s that 600 polls gave, and the probe then failed on an unbound name rather than a slow server.
            deadline = time.monotonic() + 100
            while True:
                try:
                    status, health = fetch("/healthz")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            _, listing = fetch("/tools")
            _, called = fetch("/tools/sum/call", {"a": 2, "b": 3})
            outcome = {"health": health, "tools": len(listing["tools"]), "called": called,
                       "modules": sorted(sys.modules)}
        except Exception as exc:
            outcome = {"error": repr(exc)}
        with open(report, "w") as out:
            json.dump(outcome, out)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=probe, daemon=True).start()
    sys.exit(main(["serve", definitions, "--port", port, "--no-reload"]))
''')


def _loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_serve_answers_rest_without_mcp_client_chat_providers_or_rich(tmp_path: Path):
    """`serve` on the shipped examples answers /healthz, lists and calls a tool over REST having imported neither
    the MCP client side, nor an LLM provider client, nor rich."""
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-c", SERVE_AND_REPORT, str(EXAMPLES), str(report), str(free_port())],
                          capture_output=True, text=True, timeout=150, check=False)
    assert report.exists(), f"the server never reported (exit {done.returncode}):\n{done.stderr[-3000:]}"
    outcome = json.loads(report.read_text())
    assert "error" not in outcome, f"{outcome['error']}\n{done.stderr[-3000:]}"
    assert outcome["tools"] > 0 and outcome["called"]["is_error"] is False, outcome
    assert _loaded(outcome["modules"], NOT_FOR_SERVING) == []


def test_a_definitions_directory_without_mcp_builds_without_the_sdk_client():
    """Importing the server and building the gateway's app on the shipped examples imports no MCP client module
    of the gateway's and no LLM provider client."""
    code = textwrap.dedent(f'''
        import json, sys
        from pathlib import Path
        from gateway.server.app import create_app
        from gateway.settings import Settings
        create_app(Settings(definitions=Path({str(EXAMPLES)!r})))
        print(json.dumps(sorted(sys.modules)))
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert _loaded(json.loads(done.stdout), NOT_FOR_AN_APP) == []


def test_a_python_only_catalog_without_chat_builds_without_templates_or_the_loop(write_definitions):
    """A catalog of Python tools, no provider configured: the app is built without Jinja2 (the landing page makes
    its environment on the first browser visit), without the chat loop (built by the first chat request) and
    without httpx (the pooled client of http bindings is made by the first that asks), and without jsonschema
    (plain schemas are checked by gateway.schema.fastschema; jsonschema words errors and judges the rest)."""
    root = write_definitions({"python/calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
                              "calc.yaml": """
        tools:
          - id: add
            name: Add
            user_description: Adds.
            ai_description: Adds two integers.
            binding: {python: "calc:add"}
    """})
    code = textwrap.dedent(f'''
        import json, sys
        from pathlib import Path
        from gateway.server.app import create_app
        from gateway.settings import Settings
        create_app(Settings(definitions=Path({str(root)!r})))
        print(json.dumps(sorted(sys.modules)))
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert _loaded(json.loads(done.stdout), (*NOT_FOR_AN_APP, "jinja2", "gateway.loop.loop", "httpx", "jsonschema",
                                              "referencing")) == []


def test_an_mcp_source_imports_the_client_when_built(write_definitions):
    """The laziness is by need, not by accident: a directory declaring an ``mcp:`` source does import the client
    side when its catalog is built (the upstream being down only makes its tools wait)."""
    root = write_definitions({"upstream.yaml": f'''
        sources:
          - id: far
            mcp: {{url: "http://127.0.0.1:{free_port()}/mcp", connect_timeout_s: 0.5}}
    '''})
    code = textwrap.dedent(f'''
        import json, sys
        from pathlib import Path
        from gateway.runtime.gateway import Gateway
        from gateway.settings import Settings
        Gateway(Settings(definitions=Path({str(root)!r})))
        print(json.dumps(sorted(sys.modules)))
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert {"mcp.client", "gateway.upstream.mcp.client", "gateway.sources.mcp"} <= set(json.loads(done.stdout))


def test_the_chat_settings_check_imports_neither_the_loop_nor_templates():
    """Checking the chat settings (what the server does at start) imports neither the loop itself, nor the
    provider clients, nor the template engine when no provider is configured."""
    code = textwrap.dedent('''
        import json, sys
        from gateway.loop.config import load_loop_config
        from gateway.settings import Settings
        load_loop_config(Settings())
        print(json.dumps(sorted(sys.modules)))
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert _loaded(json.loads(done.stdout), ("gateway.loop.loop", "gateway.loop.providers", "gateway.templates.compile",
                                            "jinja2")) == []


def test_every_name_the_loop_exports_resolves():
    """``gateway.loop`` imports its names on first use: each one in ``__all__`` resolves to the object of that
    name in its module, the table of homes lists exactly ``__all__``, and any other name is an AttributeError."""
    import gateway.loop

    assert set(gateway.loop.__all__) == set(gateway.loop._HOMES)
    for name in gateway.loop.__all__:
        assert getattr(gateway.loop, name).__name__ == name
    with pytest.raises(AttributeError):
        gateway.loop.Nonexistent  # noqa: B018
