"""RFC 7662 introspection, for access tokens that are not JWTs: the issuer is asked whether the token is active and
for whom. The gateway authenticates as the client the ``oauth.introspection`` setting names (HTTP Basic). An answer
must be ``active``, name this issuer when it names one, and name this gateway in ``aud`` (an opaque token meant for
another resource server would otherwise pass here). Asked within the keys' bounds (time, size, no redirect off the
origin); the answer is the token's claims for ``grants``."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from .config import OAuthConfig
from .fetch import FetchFailed, discover
from .grants import TokenRefused

MAX_ANSWER_BYTES = 65_536
log = logging.getLogger("gateway.identity")


class Introspector:
    def __init__(self, config: OAuthConfig, secret: Callable[[str], str]):
        assert config.introspection is not None
        self.config = config
        self.setting = config.introspection
        self.secret = secret  # the value of a secret by name (gateway.secrets, with the settings' rules)
        self._endpoint = self.setting.endpoint

    async def claims(self, token: str) -> dict[str, Any]:
        timeout = self.config.jwks.timeout_s
        try:
            secret = self.secret(self.setting.secret_name)
        except LookupError as exc:  # the admin's to fix: said in the log, and the caller told it cannot be checked
            log.warning("cannot introspect access tokens: %s", exc)
            raise TokenRefused("The access token cannot be checked now: introspection is not set up.") from None
        try:
            async with httpx.AsyncClient(follow_redirects=False) as client, asyncio.timeout(timeout):
                endpoint = self._endpoint or await self._discovered(client)
                auth = httpx.BasicAuth(quote(self.setting.client_id, safe=""), quote(secret, safe=""))
                async with client.stream("POST", endpoint, data={"token": token, "token_type_hint": "access_token"},
                                         auth=auth, headers={"Accept": "application/json"}) as answer:
                    body = bytearray()
                    async for chunk in answer.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_ANSWER_BYTES:
                            raise TokenRefused("The issuer's introspection answer is too large.")
        except (TimeoutError, httpx.HTTPError, FetchFailed) as exc:
            raise TokenRefused(f"The access token cannot be checked now: introspection failed "
                               f"({type(exc).__name__}).") from None
        if answer.status_code != 200:
            raise TokenRefused(f"The access token cannot be checked now: introspection answered HTTP "
                               f"{answer.status_code}.")
        try:
            claims = json.loads(body)
        except ValueError:
            claims = None
        if not isinstance(claims, dict) or claims.get("active") is not True:
            raise TokenRefused("The access token is not active.")
        if "iss" in claims and claims["iss"] != self.config.issuer:
            raise TokenRefused(f"The access token was not issued by {self.config.issuer}.")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences if isinstance(audiences, list) else []
        if not set(audiences) & set(self.config.audiences):
            raise TokenRefused(f"The access token is not meant for this gateway (its audience must be "
                               f"{self.config.audience} or {self.config.mcp_resource}).")
        if not isinstance(claims.get("exp"), (int, float)) or isinstance(claims.get("exp"), bool):
            raise TokenRefused("The access token has no 'exp' claim.")
        return claims

    async def _discovered(self, client: httpx.AsyncClient) -> str:
        metadata = await discover(client, self.config.issuer, self.config.jwks.timeout_s)
        endpoint = metadata.get("introspection_endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise FetchFailed("the discovery document names no introspection_endpoint")
        self._endpoint = endpoint
        return endpoint
