"""Which client the gateway is to an authorization server: the one its declaration names (pre-registered: its
secret or private key says how it authenticates), a client ID metadata document (its https URL is the
client_id, where the server says ``client_id_metadata_document_supported``), or one it registers (RFC 7591) and
keeps. The registration's request and answer are the ``mcp`` SDK's (``mcp.client.auth.utils``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import httpx2
from mcp.client.auth import OAuthRegistrationError
from mcp.client.auth.utils import create_client_registration_request, handle_registration_response
from mcp.shared.auth import OAuthClientMetadata
from pydantic import AnyUrl

from .config import OAuthClient
from .discovery import TIMEOUT_S, Discovered, origin
from .errors import DiscoveryFailed

CLIENT_NAME = "tool-gateway"
# RFC 8414: a server that lists no methods takes client_secret_basic.
DEFAULT_AUTH_METHODS = ("client_secret_basic",)
SECRET_METHODS = ("client_secret_basic", "client_secret_post")


@dataclass(frozen=True)
class Client:
    client_id: str
    auth_method: str  # client_secret_basic | client_secret_post | private_key_jwt | none
    client_secret: str | None = None  # a registered client's (a declared one's is read from its secret when used)
    issuer: str | None = None  # the server that registered it: another server means registering again
    redirect_uri: str | None = None  # the one it was registered with

    def as_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: Any) -> Client | None:
        try:
            return cls(**record) if isinstance(record, dict) else None
        except TypeError:
            return None


def declared(declaration: OAuthClient, client_id: str, has_secret: bool, discovered: Discovered) -> Client:
    """The pre-registered client, authenticating as the server supports."""
    if declaration.private_key is not None:
        return Client(client_id, "private_key_jwt")
    if not has_secret:
        return Client(client_id, "none")
    methods = _methods(discovered)
    return Client(client_id, next((m for m in SECRET_METHODS if m in methods), "client_secret_basic"))


async def obtain(declaration: OAuthClient, discovered: Discovered, redirect_uri: str, kept: Client | None) -> Client:
    """The client of an undeclared one: the one kept if the same server registered it for the same redirect, the
    metadata document where the server takes one, else a new registration."""
    if kept is not None and kept.issuer == discovered.issuer and kept.redirect_uri in (None, redirect_uri):
        return kept
    url = declaration.client_metadata_url
    if url is not None and discovered.metadata is not None and \
            discovered.metadata.client_id_metadata_document_supported is True:
        return Client(url, "none", issuer=discovered.issuer)
    if discovered.registration_endpoint is None:
        raise DiscoveryFailed("its authorization server offers neither dynamic registration nor client metadata "
                              "documents the gateway can use: declare the client registered there (auth: "
                              "{oauth: {client_id, client_secret}})")
    methods = _methods(discovered)
    method = next((m for m in (*SECRET_METHODS, "none") if m in methods), "client_secret_basic")
    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl(redirect_uri)], client_name=CLIENT_NAME,
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method=method)  # type: ignore[arg-type]
    request = create_client_registration_request(discovered.metadata, metadata, origin(discovered.issuer))
    try:
        async with httpx2.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as http:
            answered = await handle_registration_response(await http.send(request))
    except OAuthRegistrationError as exc:
        raise DiscoveryFailed(f"its authorization server refused to register the gateway: {_first_line(exc)}") \
            from None
    except httpx2.HTTPError as exc:
        raise DiscoveryFailed(f"its authorization server's registration endpoint could not be reached: "
                              f"{type(exc).__name__}") from None
    chosen = answered.token_endpoint_auth_method or (method if answered.client_secret else "none")
    if chosen in SECRET_METHODS and not answered.client_secret:
        raise DiscoveryFailed(f"its authorization server registered the gateway for {chosen} without a secret")
    if chosen not in (*SECRET_METHODS, "none"):
        raise DiscoveryFailed(f"its authorization server registered the gateway for {chosen}, which an "
                              "authorization-code client of the gateway cannot use")
    return Client(answered.client_id, chosen, answered.client_secret, discovered.issuer, redirect_uri)


def _methods(discovered: Discovered) -> tuple[str, ...]:
    listed = discovered.metadata.token_endpoint_auth_methods_supported if discovered.metadata is not None else None
    return tuple(listed) if listed else DEFAULT_AUTH_METHODS


def _first_line(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
