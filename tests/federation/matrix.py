"""The upstreams of the federation matrix: servers nobody here wrote the protocol side of (FastMCP 2/3/4, the ``mcp``
SDK's MCPServer, the npm reference servers, a TypeScript SDK example), each in the transports and modes it offers,
with the calls each is asked to answer. The matrix's tests and docs/interop.md's compatibility table read this list."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import peers
from support import NODE_MODULES

SERVERS = Path(__file__).resolve().parent / "servers"
PYTHON_PEER = SERVERS / "python_peer.py"
SDK_PACKAGE = NODE_MODULES / "@modelcontextprotocol"
NODE = shutil.which("node") or "/usr/bin/node"
# The checks each upstream goes through, in the order of the table's columns (docs/interop.md).
CHECKS = ("listed", "called", "content", "restart")

PYTHON_CALLS = (("add", {"a": 2, "b": 3}), ("hello", {"name": "matrix"}), ("picture", {"caption": "sunny"}),
                ("refuse", {"reason": "no, thanks"}))
# What server-filesystem is given to read, under the directory the test serves it (FILES below).
FILES = {"hello.txt": "hello from fs\n", "notes/todo.md": "# todo\n- federate\n"}
PIXEL_PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                          "1f15c4890000000d49444154789c6360f8cfc0000003010100c95ffe780000000049454e44ae426082")
# server-memory's graph, one JSON object a line as it stores it.
MEMORY = [{"type": "entity", "name": "gateway", "entityType": "service", "observations": ["federates MCP servers"]},
          {"type": "entity", "name": "matrix", "entityType": "test", "observations": ["calls every upstream"]},
          {"type": "relation", "from": "matrix", "to": "gateway", "relationType": "tests"}]


@dataclass(frozen=True)
class Peer:
    """One upstream: ``key`` is its source id (and, with ``_``, its tools' prefix); ``command`` starts it, with
    ``{port}`` (HTTP), ``{files}`` and ``{memory}`` filled in by the test."""

    key: str
    name: str
    version: str
    transport: str  # "stdio", or "HTTP" and its mode
    command: tuple[str, ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    env: dict[str, str] = field(default_factory=dict)
    missing: str | None = None  # why it cannot run here (not installed), None when it can
    expected_failures: dict[str, str] = field(default_factory=dict)  # check -> why the gateway fails it today

    @property
    def http(self) -> bool:
        return self.transport != "stdio"

    def argv(self, **values: str) -> list[str]:
        return [part.format(**values) for part in self.command]


def npm_version(package: str) -> str | None:
    manifest = NODE_MODULES / package / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.exists() else None


def python_peers() -> list[Peer]:
    frameworks = [(f"fm{peer[-1]}", "FastMCP", peers.version(peer), {"PYTHONPATH": str(peers.location(peer))},
                   None if peers.installed(peer) else f"{peers.PEERS[peer]} not installed "
                   "(python tests/federation/peers.py)") for peer in peers.PEERS]
    frameworks.append(("fm4", "FastMCP", importlib.metadata.version("fastmcp"), {}, None))
    found = []
    for key, name, version, env, missing in frameworks:
        modes = {"sse": ("HTTP stateful SSE", ()), "json": ("HTTP stateful JSON", ("--json",)),
                 "lsse": ("HTTP stateless SSE", ("--stateless",)),
                 "ljson": ("HTTP stateless JSON", ("--stateless", "--json"))}
        for mode, (transport, flags) in modes.items():
            found.append(Peer(f"{key}{mode}", name, version, transport,
                              (sys.executable, str(PYTHON_PEER), "fastmcp", "http", "{port}", *flags), PYTHON_CALLS,
                              env, missing))
        found.append(Peer(f"{key}io", name, version, "stdio", (sys.executable, str(PYTHON_PEER), "fastmcp", "stdio"),
                          PYTHON_CALLS, env, missing))
    sdk = importlib.metadata.version("mcp")
    found += [
        Peer("sdksse", "mcp SDK MCPServer", sdk, "HTTP stateful SSE",
             (sys.executable, str(PYTHON_PEER), "sdk", "http", "{port}"), PYTHON_CALLS),
        Peer("sdkljson", "mcp SDK MCPServer", sdk, "HTTP stateless JSON",
             (sys.executable, str(PYTHON_PEER), "sdk", "http", "{port}", "--stateless", "--json"), PYTHON_CALLS),
        Peer("sdkio", "mcp SDK MCPServer", sdk, "stdio", (sys.executable, str(PYTHON_PEER), "sdk", "stdio"),
             PYTHON_CALLS),
    ]
    return found


def npm_peers() -> list[Peer]:
    def npm(key: str, package: str, transport: str, script: str, args: tuple[str, ...], calls: Any,
            env: dict[str, str] | None = None, expected_failures: dict[str, str] | None = None,
            name: str | None = None) -> Peer:
        version = npm_version(package)
        missing = None if version else f"{package} not installed (npm ci --prefix tests/clients)"
        return Peer(key, name or package.removeprefix("@modelcontextprotocol/"), version or "?", transport,
                    (NODE, str(NODE_MODULES / package / script), *args), calls, env or {}, missing,
                    expected_failures or {})

    everything = (("echo", {"message": "hi there"}), ("get-sum", {"a": 2, "b": 3}), ("get-tiny-image", {}),
                  ("get-structured-content", {"location": "New York"}), ("get-resource-links", {"count": 2}),
                  ("get-annotated-message", {"messageType": "success", "includeImage": True}))
    files = (("read_text_file", {"path": "{files}/hello.txt"}), ("list_directory", {"path": "{files}"}),
             ("read_media_file", {"path": "{files}/pixel.png"}), ("get_file_info", {"path": "{files}/nowhere"}))
    memory = (("read_graph", {}), ("search_nodes", {"query": "gateway"}), ("open_nodes", {"names": ["matrix"]}))
    greet = (("greet", {"name": "matrix"}), ("list-files", {"includeDescriptions": True}))
    return [
        npm("evio", "@modelcontextprotocol/server-everything", "stdio", "dist/index.js", ("stdio",), everything),
        npm("evhttp", "@modelcontextprotocol/server-everything", "HTTP stateful SSE", "dist/index.js",
            ("streamableHttp",), everything, {"PORT": "{port}"}),
        npm("fsio", "@modelcontextprotocol/server-filesystem", "stdio", "dist/index.js", ("{files}",), files),
        npm("memio", "@modelcontextprotocol/server-memory", "stdio", "dist/index.js", (), memory,
            {"MEMORY_FILE_PATH": "{memory}"}),
        npm("tshttp", "@modelcontextprotocol/sdk", "HTTP stateful SSE",
            "dist/esm/examples/server/simpleStreamableHttp.js", (), greet, {"MCP_PORT": "{port}"},
            None, "TypeScript SDK example simpleStreamableHttp"),
    ]


PEERS = python_peers() + npm_peers()
BY_KEY = {peer.key: peer for peer in PEERS}


def filled(value: Any, **values: str) -> Any:
    """``value`` (a call's arguments) with the ``{files}``… placeholders of its strings filled in."""
    if isinstance(value, str):
        return value.format(**values)
    if isinstance(value, dict):
        return {key: filled(item, **values) for key, item in value.items()}
    if isinstance(value, list):
        return [filled(item, **values) for item in value]
    return value


def prepare(directory: Path) -> dict[str, str]:
    """What the npm servers read (a files directory, a memory file) written under ``directory``; the values of the
    placeholders."""
    files = directory / "files"
    for name, text in FILES.items():
        (files / name).parent.mkdir(parents=True, exist_ok=True)
        (files / name).write_text(text)
    (files / "pixel.png").write_bytes(PIXEL_PNG)
    memory = directory / "memory.jsonl"
    memory.write_text("".join(json.dumps(line) + "\n" for line in MEMORY))
    return {"files": str(files), "memory": str(memory)}
