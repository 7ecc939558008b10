"""One upstream for every Python MCP framework of the matrix, as people write them: FastMCP (2.14, 3, 4 — whichever
``fastmcp`` is importable: each version is installed in a directory of its own, put on PYTHONPATH) or the ``mcp``
SDK's own MCPServer, served over stdio or streamable HTTP:

    python python_peer.py fastmcp|sdk stdio
    python python_peer.py fastmcp|sdk http PORT [--stateless] [--json]

Its tools answer each kind of result the matrix compares: a typed one (``structuredContent`` beside its text), plain
text, several blocks with an image among them, and an error."""

from __future__ import annotations

import sys

# A 1x1 PNG: the image block's bytes, the same in every framework.
PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                      "1f15c4890000000d49444154789c6360f8cfc0000003010100c95ffe780000000049454e44ae426082")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def hello(name: str) -> str:
    """Say hello."""
    return f"hello {name}\n"


def refuse(reason: str) -> str:
    """Always fails, with the reason."""
    raise ValueError(reason)


def build(framework: str):
    if framework == "fastmcp":
        from fastmcp import FastMCP
        from fastmcp.utilities.types import Image
        server = FastMCP("python-peer")
    else:
        from mcp.server.mcpserver import Image, MCPServer
        server = MCPServer("python-peer")

    def picture(caption: str):  # unannotated: a list of blocks has no output schema in any framework
        """A caption, a 1x1 PNG and a closing line."""
        return [f"caption: {caption}", Image(data=PIXEL, format="png"), "the end"]

    for tool in (add, hello, refuse, picture):
        server.tool()(tool)
    return server


if __name__ == "__main__":
    framework, transport = sys.argv[1], sys.argv[2]
    server = build(framework)
    if transport == "stdio":
        if framework == "fastmcp":
            server.run("stdio", show_banner=False)
        else:
            server.run("stdio")
    else:
        import uvicorn
        stateless, json_response = "--stateless" in sys.argv, "--json" in sys.argv
        if framework == "fastmcp":
            app = server.http_app(stateless_http=stateless, json_response=json_response)
        else:
            app = server.streamable_http_app(stateless_http=stateless, json_response=json_response)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[3]), log_level="warning", lifespan="on")
