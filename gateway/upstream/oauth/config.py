"""An ``mcp:`` source's ``auth:`` as written: ``auth: oauth`` (discovery, then a client ID metadata document or
dynamic registration), or ``auth: {oauth: {grant, client_id, client_secret, private_key, signing_alg, scopes,
client_metadata_url, idp}}``. Values may name secrets (``{{ secrets.NAME }}``): they stay templates here (the
declaration is part of the pooled session's key) and are filled in when a token is asked for.

``grant: cross_app_access`` is MCP's enterprise-managed authorization (SEP-990): the gateway's identity assertion
(``idp.id_token``) is exchanged at the enterprise identity provider (``idp``) for an identity assertion grant
(ID-JAG, RFC 8693), which the upstream's authorization server takes for an access token (the JWT bearer grant,
RFC 7523) — no browser, no admin's click."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

AUTHORIZATION_CODE = "authorization_code"
CLIENT_CREDENTIALS = "client_credentials"
CROSS_APP_ACCESS = "cross_app_access"
CREDENTIALS_NEEDED = ("grant client_credentials authenticates the gateway's own client: give client_id with "
                      "client_secret or private_key")
IDP_WITH_CROSS_APP = ("idp (the identity provider that issues the identity assertion grant) goes with grant "
                      "cross_app_access, and only with it")
GATEWAY = "gateway"  # the principal of the gateway's own connection (a user's own tokens will be keyed by the user)
# The keys whose values may name secrets (idp_*: the identity provider's, for cross_app_access).
TEMPLATED = ("client_id", "client_secret", "private_key", "idp_client_id", "idp_client_secret", "idp_id_token")
# On a request the upstream refused: the path where an admin authorizes the gateway (GET /oauth/connect/<source>).
CONNECT_EXTENSION = "gateway.oauth_connect"


@dataclass(frozen=True)
class OAuthClient:
    grant: str = AUTHORIZATION_CODE
    client_id: str | None = None
    client_secret: str | None = None
    private_key: str | None = None
    signing_alg: str | None = None
    scopes: tuple[str, ...] = ()
    client_metadata_url: str | None = None
    # cross_app_access: the enterprise identity provider's token endpoint (or its issuer, whose discovery document
    # names it), the gateway's client there, and the identity assertion exchanged there.
    idp_token_endpoint: str | None = None
    idp_issuer: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = None
    idp_id_token: str | None = None

    @property
    def templates(self) -> dict[str, str]:
        """The values that may name secrets, by key (those given)."""
        return {key: value for key in TEMPLATED if (value := getattr(self, key)) is not None}


def parse(value: Any) -> tuple[OAuthClient | None, list[tuple[tuple[str, ...], str]]]:
    """The declaration of ``auth:`` (already schema-checked), or None and its problems as (path, message)."""
    if value == "oauth":
        return OAuthClient(), []
    spec: Mapping[str, Any] = (value.get("oauth") or {}) if isinstance(value, Mapping) else {}
    idp: Mapping[str, Any] = spec.get("idp") or {}
    client = OAuthClient(
        grant=str(spec.get("grant", AUTHORIZATION_CODE)),
        client_id=_text(spec, "client_id"),
        client_secret=_text(spec, "client_secret"),
        private_key=_text(spec, "private_key"),
        signing_alg=_text(spec, "signing_alg"),
        scopes=tuple(str(scope) for scope in spec.get("scopes") or ()),
        client_metadata_url=_text(spec, "client_metadata_url"),
        **{f"idp_{key}": _text(idp, key) for key in ("token_endpoint", "issuer", "client_id", "client_secret",
                                                     "id_token")},
    )
    problems: list[tuple[tuple[str, ...], str]] = []
    where = ("oauth",)
    if client.client_id is None and (client.client_secret or client.private_key):
        problems.append((where, "a client_secret or private_key belongs to a client: give its client_id"))
    if client.client_secret is not None and client.private_key is not None:
        problems.append((where, "give client_secret or private_key, not both"))
    if client.grant in (CLIENT_CREDENTIALS, CROSS_APP_ACCESS) and not (client.client_secret or client.private_key):
        problems.append((where, CREDENTIALS_NEEDED.replace("client_credentials", client.grant)))
    if (client.grant == CROSS_APP_ACCESS) != bool(idp):
        problems.append((where + ("idp",), IDP_WITH_CROSS_APP))
    elif idp and not (client.idp_token_endpoint or client.idp_issuer):
        problems.append((where + ("idp",), "give the identity provider's token_endpoint or its issuer"))
    if client.grant == AUTHORIZATION_CODE and client.private_key is not None:
        problems.append((where + ("private_key",), "private_key (private_key_jwt) is for grant client_credentials"))
    if client.signing_alg is not None and client.private_key is None:
        problems.append((where + ("signing_alg",), "signing_alg names the algorithm of private_key: give it"))
    return (None if problems else client), problems


def _text(spec: Mapping[str, Any], key: str) -> str | None:
    value = spec.get(key)
    return str(value) if value is not None else None
