"""The token endpoint, through authlib's OAuth 2 client (``authlib.integrations.httpx_client``): the
authorization URL (PKCE S256, ``state``, RFC 8707 ``resource``), the code exchange, refreshes and the
client-credentials grant, the client authenticating as it was registered: client_secret_basic,
client_secret_post, none, or private_key_jwt (RFC 7523: an assertion authlib signs with joserfc, audience the
authorization server's issuer), and SEP-990's cross-app access (an identity assertion exchanged at the identity
provider for an ID-JAG, then the JWT bearer grant). What the server answers is kept as a ``Token``; its refusals
are told by their OAuth error code and description, never with a credential."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import httpx2
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from joserfc import jwk

from ... import secrets as secret_store
from ...identity.fetch import FetchFailed
from ...identity.fetch import discover as discover_issuer
from .discovery import TIMEOUT_S, Discovered
from .errors import TokenFailed
from .registration import Client

# A token this close to its end is refreshed before it is sent: a minute, or a tenth of a shorter lifetime.
EXPIRY_MARGIN_S = 60.0
MAX_WORDS = 200  # of the server's own error description
_EC_ALGS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


@dataclass(frozen=True)
class Token:
    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None  # what was granted (the request's scope when the server did not say)
    issued_at: float | None = None

    def fresh(self) -> bool:
        if self.expires_at is None:
            return True
        margin = min(EXPIRY_MARGIN_S, (self.expires_at - (self.issued_at or self.expires_at)) / 10)
        return time.time() < self.expires_at - margin

    def as_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: Any) -> Token | None:
        try:
            return cls(**record) if isinstance(record, dict) else None
        except TypeError:
            return None


@dataclass(frozen=True)
class Credentials:
    """A client and what authenticates it (its secret, or the PEM of its private key), read from secrets now."""

    client: Client
    secret: str | None = None
    private_key: str | None = None
    signing_alg: str | None = None


async def authorization_url(discovered: Discovered, client: Client, redirect_uri: str,
                            scope: str | None) -> tuple[str, str, str]:
    """(the URL to send the browser to, its state, the PKCE verifier)."""
    verifier = generate_token(64)
    async with _oauth(Credentials(client), discovered, redirect_uri) as oauth:
        url, state = oauth.create_authorization_url(discovered.authorization_endpoint, code_verifier=verifier,
                                                    scope=scope, resource=discovered.resource)
    return url, state, verifier


async def exchange(discovered: Discovered, credentials: Credentials, redirect_uri: str, code: str, verifier: str,
                   scope: str | None) -> Token:
    return await _ask(discovered, credentials, scope, redirect_uri, grant_type="authorization_code", code=code,
                      code_verifier=verifier)


async def refresh(discovered: Discovered, credentials: Credentials, token: Token) -> Token:
    return await _ask(discovered, credentials, token.scope, None, refresh=token.refresh_token)


async def client_credentials(discovered: Discovered, credentials: Credentials, scope: str | None) -> Token:
    return await _ask(discovered, credentials, scope, None, grant_type="client_credentials",
                      **({"scope": scope} if scope else {}))


@dataclass(frozen=True)
class IdentityProvider:
    """The enterprise identity provider of ``cross_app_access``, with its secrets read now."""

    token_endpoint: str | None
    issuer: str | None
    client_id: str | None
    client_secret: str | None
    id_token: str


async def cross_app_access(discovered: Discovered, credentials: Credentials, scope: str | None,
                           idp: IdentityProvider) -> Token:
    """SEP-990: the identity assertion exchanged at the identity provider for an ID-JAG naming the upstream's
    authorization server (``audience``) and the upstream (``resource``), then that grant for an access token."""
    grant = await _identity_grant(discovered, idp)
    secret_store.conceal((grant,), "upstream oauth")  # a bearer credential too, for its few minutes
    return await _ask(discovered, credentials, scope, None, grant_type=JWT_BEARER, assertion=grant,
                      **({"scope": scope} if scope else {}))


async def _identity_grant(discovered: Discovered, idp: IdentityProvider) -> str:
    endpoint = idp.token_endpoint or await _idp_token_endpoint(idp.issuer or "")
    oauth = AsyncOAuth2Client(client_id=idp.client_id, client_secret=idp.client_secret,
                              token_endpoint_auth_method="client_secret_basic" if idp.client_secret else "none",
                              timeout=TIMEOUT_S, follow_redirects=False)
    try:
        async with oauth:
            answer = await oauth.fetch_token(endpoint, grant_type=TOKEN_EXCHANGE, subject_token=idp.id_token,
                                             subject_token_type=ID_TOKEN, requested_token_type=ID_JAG,
                                             audience=discovered.issuer, resource=discovered.resource,
                                             **({} if idp.client_secret else {"client_id": idp.client_id}))
    except (OAuthError, httpx2.HTTPError, ValueError) as exc:
        # An identity provider may quote what it was sent: the assertion never reaches a message, even in part.
        raise _failed(exc, "its identity provider", "the token exchange", ("identity assertion", idp.id_token)) \
            from None
    grant = answer.get("access_token")
    if answer.get("issued_token_type") != ID_JAG or not isinstance(grant, str) or not grant:
        raise TokenFailed("its identity provider answered without an identity assertion grant (issued_token_type "
                          f"{str(answer.get('issued_token_type'))[:100]!r})")
    return grant


async def _idp_token_endpoint(issuer: str) -> str:
    """The token endpoint the identity provider's discovery document names."""
    try:
        async with httpx.AsyncClient(follow_redirects=False) as http:
            endpoint = (await discover_issuer(http, issuer, TIMEOUT_S)).get("token_endpoint")
    except FetchFailed as exc:
        raise TokenFailed(f"the metadata of its identity provider {issuer} cannot be read: {exc}") from None
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        raise TokenFailed(f"the discovery document of its identity provider {issuer} names no token_endpoint")
    return endpoint


async def _ask(discovered: Discovered, credentials: Credentials, scope: str | None, redirect_uri: str | None,
               refresh: str | None = None, **params: Any) -> Token:
    try:
        async with _oauth(credentials, discovered, redirect_uri) as oauth:
            if refresh is not None:
                answer = await oauth.refresh_token(discovered.token_endpoint, refresh_token=refresh,
                                                   resource=discovered.resource)
            else:
                answer = await oauth.fetch_token(discovered.token_endpoint, resource=discovered.resource, **params)
    except (OAuthError, httpx2.HTTPError, ValueError) as exc:
        raise _failed(exc, "its authorization server", "the token request") from None
    if not isinstance(answer.get("access_token"), str) or not answer["access_token"]:
        raise TokenFailed("its authorization server answered the token request without an access token")
    expires = answer.get("expires_at")
    return Token(answer["access_token"], answer.get("refresh_token") or refresh,
                 float(expires) if isinstance(expires, int | float) else None, answer.get("scope") or scope,
                 time.time())


def _failed(exc: Exception, server: str, request: str, hidden: tuple[str, str] | None = None) -> TokenFailed:
    """Why a token request to ``server`` failed, in words: its OAuth error code and description (``hidden`` taken
    out), the HTTP status it answered, that it could not be reached, or that it answered no JSON (authlib reads
    the answer as JSON: ``ValueError``). Never a credential."""
    if isinstance(exc, OAuthError):
        words = f"{exc.error}: {exc.description}" if exc.description else str(exc.error)
        words = secret_store.redact(words, [hidden]) if hidden is not None else words
        return TokenFailed(f"{server} refused {request} ({words[:MAX_WORDS]})", str(exc.error))
    if isinstance(exc, httpx2.HTTPStatusError):
        return TokenFailed(f"{server} answered {request} with HTTP {exc.response.status_code}")
    if isinstance(exc, httpx2.HTTPError):
        return TokenFailed(f"{server}'s token endpoint could not be reached: {type(exc).__name__}")
    return TokenFailed(f"{server} answered {request} with no JSON object")


def _oauth(credentials: Credentials, discovered: Discovered, redirect_uri: str | None) -> AsyncOAuth2Client:
    client = credentials.client
    key: Any = credentials.secret
    if client.auth_method == "private_key_jwt":
        key, alg = _private_key(credentials)
    oauth = AsyncOAuth2Client(client_id=client.client_id, client_secret=key,
                              token_endpoint_auth_method=client.auth_method, redirect_uri=redirect_uri,
                              code_challenge_method="S256", timeout=TIMEOUT_S, follow_redirects=False)
    if client.auth_method == "private_key_jwt":
        oauth.register_client_auth_method(PrivateKeyJWT(discovered.issuer, alg=alg))
    return oauth


def _private_key(credentials: Credentials) -> tuple[Any, str]:
    """The joserfc key of the client's PEM, and its algorithm (declared, or the usual one for its type)."""
    pem = (credentials.private_key or "").encode()
    try:
        loaded = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        raise TokenFailed("the source's private_key is not an unencrypted PEM private key") from None
    if isinstance(loaded, rsa.RSAPrivateKey):
        kind, alg = "RSA", "RS256"
    elif isinstance(loaded, ec.EllipticCurvePrivateKey):
        kind, alg = "EC", _EC_ALGS.get(loaded.curve.name, "ES256")
    elif isinstance(loaded, ed25519.Ed25519PrivateKey):
        kind, alg = "OKP", "EdDSA"
    else:
        raise TokenFailed("the source's private_key is of a type private_key_jwt cannot sign with")
    return jwk.import_key(pem, kind), credentials.signing_alg or alg
