"""The gateway as an MCP *client* of upstream servers: configuration, the wire (streamable HTTP and stdio),
connections and their pool, listings, the fast call path, relays of what an upstream sends during a call, and
how list changes are watched. The *served* MCP surface is ``gateway.server.mcp``."""
