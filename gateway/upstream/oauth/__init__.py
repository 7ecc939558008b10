"""The gateway as an OAuth 2.1 client of an upstream MCP server that demands OAuth (``mcp: {auth: oauth}``).

``config`` reads the declaration; ``discovery`` finds the authorization server (RFC 9728 protected-resource
metadata, RFC 8414 / OpenID discovery, the 2025-03-26 fallbacks); ``registration`` names the client (pre-registered,
a client ID metadata document, or RFC 7591 dynamic registration); ``tokens`` asks the token endpoint (authlib);
``store`` keeps tokens encrypted at rest; ``authorizer`` ties them to one upstream's connection (an ``httpx2.Auth``
on its HTTP client) and to the authorization-code flow an admin's browser drives (``gateway.server.oauth_client``).
Below ``gateway.upstream.mcp``: nothing here knows of MCP sessions.
"""
