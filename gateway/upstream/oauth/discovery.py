"""Where an upstream's authorization server is, and what it supports, found as the MCP specification orders it.

Protected-resource metadata (RFC 9728): the URL the upstream's 401 named (``WWW-Authenticate: Bearer
resource_metadata=...``), else the path-based well-known URL, else the root one. Its ``resource`` must be the
upstream itself (or a parent of it): metadata naming another resource is refused before anything is sent to its
authorization server (RFC 8707, MCP's resource-mismatch rule). Then the authorization server's metadata: RFC 8414
path-aware, OpenID Connect path-aware and path-appended for an issuer with a path; the RFC 8414 root then OpenID
root for one without. An upstream with no protected-resource metadata is a 2025-03-26 server: its own origin's
RFC 8414 metadata, and without that the fixed ``/authorize``, ``/token`` and ``/register`` there.

The URL orders and the metadata models are the ``mcp`` SDK's (``mcp.client.auth.utils``, ``mcp.shared.auth``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
    handle_protected_resource_response,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from .errors import DiscoveryFailed

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Discovered:
    resource: str  # what tokens are asked for (RFC 8707 ``resource``)
    issuer: str  # the authorization server (its metadata's issuer, or the upstream's origin on the legacy path)
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    metadata: OAuthMetadata | None  # None: the 2025-03-26 fixed endpoints
    resource_metadata: ProtectedResourceMetadata | None

    def supports(self, field: str, value: str, default: tuple[str, ...] = ()) -> bool:
        listed = getattr(self.metadata, field, None) if self.metadata is not None else None
        return value in (listed if listed is not None else default)


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def discover(server_url: str, resource_metadata_url: str | None) -> Discovered:
    async with httpx2.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as http:
        prm = await _resource_metadata(http, server_url, resource_metadata_url)
        resource = resource_url_from_server_url(server_url)
        issuer = None
        if prm is not None:
            named = str(prm.resource)
            if not check_resource_allowed(requested_resource=resource, configured_resource=named):
                raise DiscoveryFailed(f"its protected-resource metadata names another resource ({named}, not "
                                      f"{resource}): the gateway does not authorize with it")
            resource = named if named.rstrip("/") != resource.rstrip("/") else resource
            if not prm.authorization_servers:
                raise DiscoveryFailed("its protected-resource metadata names no authorization server")
            issuer = str(prm.authorization_servers[0])
        metadata = await _server_metadata(http, issuer, server_url)
    if metadata is not None:
        return Discovered(resource, str(metadata.issuer), str(metadata.authorization_endpoint),
                          str(metadata.token_endpoint),
                          str(metadata.registration_endpoint) if metadata.registration_endpoint else None,
                          metadata, prm)
    if issuer is not None:
        raise DiscoveryFailed(f"its authorization server {issuer} publishes no metadata (RFC 8414 or OpenID)")
    base = origin(server_url)
    return Discovered(resource, base, urljoin(base, "/authorize"), urljoin(base, "/token"), urljoin(base, "/register"),
                      None, None)


async def _resource_metadata(http: httpx2.AsyncClient, server_url: str,
                             named: str | None) -> ProtectedResourceMetadata | None:
    for url in build_protected_resource_metadata_discovery_urls(named, server_url):
        try:
            response = await http.send(create_oauth_metadata_request(url))
        except httpx2.HTTPError as exc:
            raise DiscoveryFailed(f"its protected-resource metadata at {url} could not be read: "
                                  f"{type(exc).__name__}") from None
        if response.status_code >= 500:
            raise DiscoveryFailed(f"its protected-resource metadata at {url} answered HTTP {response.status_code}")
        found = await handle_protected_resource_response(response)
        if found is not None:
            return found
    return None


async def _server_metadata(http: httpx2.AsyncClient, issuer: str | None, server_url: str) -> OAuthMetadata | None:
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
        try:
            response = await http.send(create_oauth_metadata_request(url))
        except httpx2.HTTPError as exc:
            raise DiscoveryFailed(f"the authorization server's metadata at {url} could not be read: "
                                  f"{type(exc).__name__}") from None
        keep_looking, metadata = await handle_auth_metadata_response(response)
        if metadata is not None:
            if issuer is not None and str(metadata.issuer).rstrip("/") != issuer.rstrip("/"):
                raise DiscoveryFailed(f"the authorization server's metadata at {url} names issuer "
                                      f"{metadata.issuer}, not {issuer}")
            return metadata
        if not keep_looking:
            raise DiscoveryFailed(f"the authorization server's metadata at {url} answered HTTP "
                                  f"{response.status_code}")
    return None
