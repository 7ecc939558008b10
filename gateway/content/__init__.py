"""A tool result's content: MCP content blocks, truncation to ``max_result_chars``, and lone surrogates made
safe to encode."""
