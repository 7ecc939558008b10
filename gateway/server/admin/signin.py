"""``GET /admin/api/signin``: how the console signs in at the identity provider (``oauth.console``), for a browser
doing authorization code + PKCE as a public client — the issuer, its authorization and token endpoints (from its
discovery document), the console's client id and scopes, and the ``resource`` to ask a token for (RFC 8707: the
gateway's audience). Nothing in it is secret, and it is public: the console reads it before anyone signed in.
``404`` without ``oauth.console``.

The discovery document is read within ``fetch``'s bounds, one read at a time, kept ``oauth.jwks.cache_s``; a failed
read is answered ``502`` and not tried again for ``oauth.jwks.refresh_min_s`` (an anonymous caller cannot make the
gateway hammer the issuer), while an answer had before keeps serving. Its endpoints must be https URLs (http on a
loopback host) with a plain host name: the token endpoint's origin goes into the console's Content-Security-Policy
(``connect-src``), so nothing from the document can add a directive there.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

from ...errors import GatewayError
from ...identity.config import OAuthConfig, is_loopback_host
from .files import NotFound

log = logging.getLogger("gateway.identity")
HOST = re.compile(r"[a-z0-9.-]+|\[[0-9a-f:.]+\]")


class SignInUnavailable(GatewayError):
    """The issuer's discovery document could not be read, or does not allow the console's sign-in."""

    status = 502


class Unusable(Exception):
    """The discovery document does not give what the console's sign-in needs."""


class ConsoleSignIn:
    def __init__(self, oauth: OAuthConfig | None):
        self.oauth = oauth
        self._answer: dict[str, Any] | None = None
        self._read_at = -float("inf")
        self._failure: tuple[float, str] | None = None  # when the last read failed, and why
        self._lock = asyncio.Lock()

    @property
    def configured(self) -> bool:
        return self.oauth is not None and self.oauth.console is not None

    async def answer(self) -> dict[str, Any]:
        oauth = self.oauth
        if oauth is None or oauth.console is None:
            raise NotFound("The console signs in with an admin API key only: the setting 'oauth.console' is not set.")
        async with self._lock:
            now = time.monotonic()
            if self._answer is not None and now - self._read_at < oauth.jwks.cache_s:
                return self._answer
            if self._failure is not None and now - self._failure[0] < oauth.jwks.refresh_min_s:
                return self._stale_or_fail(oauth.issuer, self._failure[1])
            import httpx  # here: an app whose console signs in with keys only never imports it

            from ...identity.fetch import FetchFailed, discover
            try:
                async with httpx.AsyncClient(follow_redirects=False) as client:
                    metadata = await discover(client, oauth.issuer, oauth.jwks.timeout_s)
                self._answer = _answer(oauth, metadata)
            except (FetchFailed, Unusable) as exc:
                self._failure = (now, str(exc))
                log.warning("cannot read the discovery document of OAuth issuer %s for the console's sign-in: %s",
                            oauth.issuer, exc)
                return self._stale_or_fail(oauth.issuer, str(exc))
            self._read_at, self._failure = now, None
            return self._answer

    def _stale_or_fail(self, issuer: str, reason: str) -> dict[str, Any]:
        """The answer read before, if any (an identity provider's outage does not hide the sign-in); else 502."""
        if self._answer is not None:
            return self._answer
        raise SignInUnavailable(f"The console cannot sign in at {issuer}: {reason}")

    async def token_origin(self) -> str | None:
        """The origin the console posts the code to (its ``connect-src``), when the sign-in is configured and
        known; None otherwise (the page then allows its own origin only)."""
        if not self.configured:
            return None
        try:
            return origin_of((await self.answer())["token_endpoint"])
        except SignInUnavailable:
            return None


def _answer(oauth: OAuthConfig, metadata: dict[str, Any]) -> dict[str, Any]:
    assert oauth.console is not None
    endpoints = {name: _endpoint(metadata, name) for name in ("authorization_endpoint", "token_endpoint")}
    methods = metadata.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        raise Unusable("the issuer does not support PKCE with S256 (code_challenge_methods_supported)")
    return {"issuer": oauth.issuer, **endpoints, "client_id": oauth.console.client_id,
            "scope": " ".join(oauth.console.scopes), "resource": oauth.audience,
            # RFC 9207: when the issuer says it names itself in the answer, the console requires it to.
            "authorization_response_iss_parameter_supported":
                metadata.get("authorization_response_iss_parameter_supported") is True}


def _endpoint(metadata: dict[str, Any], name: str) -> str:
    url = metadata.get(name)
    if not isinstance(url, str) or origin_of(url) is None or urlsplit(url).fragment:
        raise Unusable(f"the discovery document's {name} is not an https URL (http on a loopback host only): "
                          f"{str(url)[:200]!r}")
    return url


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an https URL (http on a loopback host), or None; the host a plain name or
    address, the port a number, so the result is safe in a header."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = parts.netloc.lower()
    host = host[:-len(f":{port}")] if port is not None else host
    secure = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname))
    if not secure or not HOST.fullmatch(host):  # no user info, nothing but a name or address
        return None
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
