"""The served MCP surface (``/mcp``): the SDK-based path and the JSON fast path, the handlers both share,
sessions and their records, messages, content (prompts, resources, completion), and the channel a tool uses to
talk to its client. The upstream MCP *client* is ``gateway.upstream.mcp``."""
