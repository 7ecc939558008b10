"""The TypeScript SDK and MCP Inspector's CLI list and call tools through the MCP fast path (the pinned clients of
tests/clients/package.json: ``npm ci --prefix tests/clients``)."""

from __future__ import annotations

import json
import subprocess

from support import NODE_MODULES, needs_node_modules
from test_mcp_fast import _sdk_methods

SDK = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "dist" / "esm" / "client"
INSPECTOR = NODE_MODULES / ".bin" / "mcp-inspector"
pytestmark = needs_node_modules("@modelcontextprotocol/sdk", ".bin/mcp-inspector")

CLIENT = """
import { Client } from "%(sdk)s/index.js";
import { StreamableHTTPClientTransport } from "%(sdk)s/streamableHttp.js";
const client = new Client({ name: "ts-check", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
const tools = await client.listTools();
const sum = await client.callTool({ name: "sum", arguments: { a: 1, b: 2 } });
const bad = await client.callTool({ name: "sum", arguments: { a: 1 } });
let unknown = null;
try { await client.callTool({ name: "no_such_tool", arguments: {} }); } catch (e) { unknown = e.code; }
console.log(JSON.stringify({ tools: tools.tools.map((t) => t.name), sum: sum.content[0].text, bad: bad.isError,
                             unknown }));
await client.close();
"""


def test_typescript_sdk_goes_through_the_fast_path(start_server, shared_examples, tmp_path, monkeypatch):
    """The TypeScript SDK's client lists the tools, calls one, gets an argument error as isError and an unknown
    tool as -32602, and none of those requests reached the SDK."""
    served = start_server(shared_examples)
    seen = _sdk_methods(monkeypatch)
    script = tmp_path / "client.mjs"
    script.write_text(CLIENT % {"sdk": SDK.as_uri()})
    out = subprocess.run(["node", str(script), f"{served.url}/mcp"], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert "sum" in answer["tools"] and answer["sum"] == "3.0" and answer["bad"] is True
    assert answer["unknown"] == -32602
    assert "initialize" in seen and not {"tools/list", "tools/call"} & set(seen), seen


def test_inspector_cli_goes_through_the_fast_path(start_server, shared_examples, monkeypatch):
    """MCP Inspector's CLI lists the tools and calls one over streamable HTTP, answered by the fast path."""
    served = start_server(shared_examples)
    seen = _sdk_methods(monkeypatch)
    base = [str(INSPECTOR), "--cli", f"{served.url}/mcp", "--transport", "http", "--method"]
    listed = subprocess.run([*base, "tools/list"], check=False, capture_output=True, text=True, timeout=90)
    assert listed.returncode == 0 and "sum" in {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    called = subprocess.run([*base, "tools/call", "--tool-name", "sum", "--tool-arg", "a=1", "--tool-arg", "b=2"],
                            check=False, capture_output=True, text=True, timeout=90)
    assert called.returncode == 0 and json.loads(called.stdout)["content"][0]["text"] == "3.0"
    assert "initialize" in seen and not {"tools/list", "tools/call"} & set(seen), seen
