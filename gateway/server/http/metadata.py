"""OAuth protected-resource metadata (RFC 9728) and the ``WWW-Authenticate`` challenges that point to it.

The gateway is one resource at ``oauth.audience`` (REST, chat, the console) and its MCP endpoint another at
``<audience>/mcp``: an MCP client reads the path-based document (``/.well-known/oauth-protected-resource/mcp``),
whose ``resource`` is the URL it connects to, and asks the authorization server for a token with that ``resource``
(RFC 8707); the gateway accepts either audience.
"""

from __future__ import annotations

from typing import Any

from ...identity.config import OAuthConfig

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_url(config: OAuthConfig, mcp: bool) -> str:
    return config.audience + WELL_KNOWN + ("/mcp" if mcp else "")


def document(config: OAuthConfig, mcp: bool) -> dict[str, Any]:
    found: dict[str, Any] = {
        "resource": config.mcp_resource if mcp else config.audience,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],  # never the query string: URLs end up in logs
        "resource_signing_alg_values_supported": list(config.algorithms),
    }
    if config.published_scopes:
        found["scopes_supported"] = list(config.published_scopes)
    return found


def challenge(config: OAuthConfig, mcp: bool, *, error: str | None = None, description: str | None = None,
              scope: str | None = None) -> str:
    """A ``Bearer`` challenge (RFC 6750 §3) naming the metadata; quoted values hold neither ``"`` nor ``\\``."""
    params = {"resource_metadata": metadata_url(config, mcp), "error": error, "error_description": description,
              "scope": scope}
    return "Bearer " + ", ".join(f'{name}="{_quotable(value)}"' for name, value in params.items() if value)


def _quotable(value: str) -> str:
    return "".join("'" if ch in '"\\' else ch for ch in value if ch.isprintable())[:500]
