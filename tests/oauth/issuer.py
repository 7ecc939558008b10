"""A programmable OAuth issuer for the resource-server tests: a real HTTP server on 127.0.0.1 that publishes a
discovery document and a JWKS, mints RS256 / ES256 access tokens with PyJWT, and can misbehave on demand (hang,
redirect, answer too much, name another issuer) while counting what it was asked. The end-to-end flows with a
real authorization server and real clients are in tests/identity/."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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
                                 "authorization_endpoint": f"{self.url}/authorize", "token_endpoint": f"{self.url}/token"})

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
            if self.clients.get(client_id) != secret:
                return JSONResponse({"error": "invalid_client", "error_description": "unknown client"}, 401)
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
                                 Route("/token", token, methods=["POST"])])


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
