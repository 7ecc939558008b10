"""A programmable OAuth issuer for the resource-server tests: a real HTTP server on 127.0.0.1 that publishes a
discovery document and a JWKS, mints RS256 / ES256 access tokens with PyJWT, and can misbehave on demand (hang,
redirect, answer too much, name another issuer) while counting what it was asked. It grants client credentials,
token exchange, and authorization codes with PKCE (S256 only) to whoever ``signed_in`` says its browser session
is, with rotating refresh tokens and RFC 7009 revocation. The end-to-end flows with a
real authorization server and real clients are in tests/identity/."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from support import serving


@dataclass
class SigningKey:
    kid: str
    private: Any
    algorithm: str

    def jwk(self) -> dict[str, Any]:
        family = RSAAlgorithm if self.algorithm.startswith(("RS", "PS")) else ECAlgorithm
        return {**family.to_jwk(self.private.public_key(), as_dict=True), "kid": self.kid, "use": "sig",
                "alg": self.algorithm}


def rsa_key(kid: str | None = None) -> SigningKey:
    return SigningKey(kid or uuid.uuid4().hex[:8], rsa.generate_private_key(public_exponent=65537, key_size=2048),
                      "RS256")


def ec_key(kid: str | None = None) -> SigningKey:
    return SigningKey(kid or uuid.uuid4().hex[:8], ec.generate_private_key(ec.SECP256R1()), "ES256")


@dataclass
class Issuer:
    """The server's state: tests change it between requests (the server reads it on each one)."""

    url: str = ""
    keys: list[SigningKey] = field(default_factory=lambda: [rsa_key(), ec_key()])
    extra_jwks: list[dict[str, Any]] = field(default_factory=list)  # published as they are (an oct key, junk)
    hang_s: float = 0.0  # the JWKS answers only after this
    redirect_jwks_to: str | None = None  # the JWKS answers with a redirect there
    jwks_padding: int = 0  # bytes of filler in the JWKS answer
    named_issuer: str | None = None  # what the discovery document says the issuer is (default: itself)
    asked: Counter[str] = field(default_factory=Counter)
    clients: dict[str, str] = field(default_factory=lambda: {"gateway": "gateway-secret"})  # id -> secret
    grants: list[dict[str, str]] = field(default_factory=list)  # each token request's form, secrets left out
    public_clients: set[str] = field(default_factory=lambda: {"gateway-console"})  # no secret: PKCE alone
    signed_in: str = "alice"  # who the browser at /authorize is signed in as
    lifetime_s: float = 300  # of the access tokens the code and refresh grants issue
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    refresh_tokens: dict[str, dict[str, str]] = field(default_factory=dict)  # the live ones (rotated on use)
    revoked: list[str] = field(default_factory=list)
    outage: bool = False  # the refresh grant answers 503 temporarily_unavailable
    refresh_delay_s: float = 0.0  # the refresh grant answers this late (the token it took is rotated at once)

    def token(self, *, sub: str = "alice", audience: str | list[str] = "", scope: str = "", key: SigningKey | None = None,
              lifetime_s: float = 300, header: dict[str, Any] | None = None, **claims: Any) -> str:
        """An access token signed with ``key`` (default: the first RSA key); claims override the defaults."""
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.url, "sub": sub, "aud": audience, "iat": now, "exp": now + int(lifetime_s),
                "client_id": "test-client", "scope": scope, **claims}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key.private, algorithm=key.algorithm,
                          headers={"kid": key.kid, "typ": "at+jwt", **(header or {})})

    def app(self) -> Starlette:
        async def discovery(request: Request) -> Response:
            self.asked["discovery"] += 1
            return JSONResponse({"issuer": self.named_issuer or self.url, "jwks_uri": f"{self.url}/jwks",
                                 "authorization_endpoint": f"{self.url}/authorize", "token_endpoint": f"{self.url}/token",
                                 "revocation_endpoint": f"{self.url}/revoke", "code_challenge_methods_supported": ["S256"]})

        async def authorize(request: Request) -> Response:
            """Approves at once, as ``signed_in``: a browser with a session at the provider sees no page."""
            self.asked["authorize"] += 1
            query = request.query_params
            client_id = query.get("client_id", "")
            if client_id not in self.clients and client_id not in self.public_clients:
                return JSONResponse({"error": "unknown client"}, 400)
            if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" \
                    or not query.get("code_challenge") or not query.get("redirect_uri"):
                return JSONResponse({"error": "invalid_request"}, 400)
            code = uuid.uuid4().hex
            self.codes[code] = {"client_id": client_id, "redirect_uri": query["redirect_uri"], "sub": self.signed_in,
                                "challenge": query["code_challenge"], "scope": query.get("scope", ""),
                                "resource": query.get("resource", "")}
            return RedirectResponse(f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query.get('state', ''), 'iss': self.url})}", 302)

        async def revoke(request: Request) -> Response:
            form = dict(await request.form())
            client_id, secret = _client(request, form)
            if self.clients.get(client_id) != secret:
                return JSONResponse({"error": "invalid_client"}, 401)
            self.revoked.append(str(form.get("token")))
            self.refresh_tokens.pop(str(form.get("token")), None)
            return Response(status_code=200)

        async def jwks(request: Request) -> Response:
            self.asked["jwks"] += 1
            if self.hang_s:
                await asyncio.sleep(self.hang_s)
            if self.redirect_jwks_to:
                return RedirectResponse(self.redirect_jwks_to, 302)
            body: dict[str, Any] = {"keys": [key.jwk() for key in self.keys] + self.extra_jwks}
            if self.jwks_padding:
                body["padding"] = "x" * self.jwks_padding
            return JSONResponse(body)

        async def token(request: Request) -> Response:
            """client_credentials and token exchange (RFC 8693), for clients of ``clients`` (HTTP Basic or form)."""
            self.asked["token"] += 1
            form = dict(await request.form())
            client_id, secret = _client(request, form)
            self.grants.append({k: v for k, v in form.items() if k != "client_secret"} | {"client": client_id})
            public = client_id in self.public_clients and not secret
            if not public and self.clients.get(client_id) != secret:
                return JSONResponse({"error": "invalid_client", "error_description": "unknown client"}, 401)
            if form.get("grant_type") in ("authorization_code", "refresh_token"):
                answer = self._code_or_refresh(form, client_id)
                if form.get("grant_type") == "refresh_token":
                    await asyncio.sleep(self.refresh_delay_s)
                return answer
            if public:
                return JSONResponse({"error": "unauthorized_client"}, 400)
            audience = form.get("audience") or form.get("resource") or ""
            if form.get("grant_type") == "client_credentials":
                return _issued(self.token(sub=client_id, audience=audience, scope=form.get("scope", ""),
                                          client_id=client_id))
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
                return JSONResponse({"error": "unsupported_grant_type"}, 400)
            try:
                subject = jwt.decode(form.get("subject_token", ""), self.keys[0].private.public_key(),
                                     algorithms=["RS256"], options={"verify_aud": False}, issuer=self.url)
            except jwt.InvalidTokenError:
                return JSONResponse({"error": "invalid_grant", "error_description": "subject_token refused"}, 400)
            return _issued(self.token(sub=subject["sub"], audience=audience, scope=form.get("scope", ""),
                                      client_id=client_id, act={"sub": client_id}))

        return Starlette(routes=[Route("/.well-known/openid-configuration", discovery), Route("/jwks", jwks),
                                 Route("/token", token, methods=["POST"]), Route("/authorize", authorize),
                                 Route("/revoke", revoke, methods=["POST"])])

    def _code_or_refresh(self, form: dict[str, Any], client_id: str) -> Response:
        if form["grant_type"] == "authorization_code":
            grant = self.codes.pop(str(form.get("code")), None)  # a code is used once
            verifier = str(form.get("code_verifier", ""))
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if grant is None or grant["client_id"] != client_id or grant["redirect_uri"] != form.get("redirect_uri") \
                    or grant["challenge"] != challenge:
                return JSONResponse({"error": "invalid_grant", "error_description": "code refused"}, 400)
        elif self.outage:
            return JSONResponse({"error": "temporarily_unavailable"}, 503)
        else:
            grant = self.refresh_tokens.pop(str(form.get("refresh_token")), None)  # rotated: each is used once
            if grant is None or grant["client_id"] != client_id:
                return JSONResponse({"error": "invalid_grant", "error_description": "refresh token refused"}, 400)
        refresh = uuid.uuid4().hex
        self.refresh_tokens[refresh] = grant
        token = self.token(sub=grant["sub"], audience=grant["resource"] or client_id, scope=grant["scope"],
                           client_id=client_id, lifetime_s=self.lifetime_s)
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime_s,
                             "refresh_token": refresh, "scope": grant["scope"]})


def _client(request: Request, form: dict[str, Any]) -> tuple[str, str]:
    basic = request.headers.get("authorization", "")
    if basic.lower().startswith("basic "):
        from urllib.parse import unquote

        name, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
        return unquote(name), unquote(secret)
    return str(form.get("client_id", "")), str(form.get("client_secret", ""))


def _issued(token: str) -> Response:
    return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": 300,
                         "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})


@contextmanager
def issuing(issuer: Issuer | None = None):
    issuer = issuer or Issuer()
    with serving(issuer.app()) as server:
        issuer.url = server.url
        yield issuer
