"""Clients of what lies behind the gateway: the shared HTTP client and its address rules (no
argument-controlled hosts), and ``upstream.mcp``, the client side of MCP (upstream servers the gateway calls)."""
