"""The issuer's signing keys: found through its discovery document, fetched within bounds, kept ``cache_s``, and
fetched again when a token names a key not held — at most once per ``refresh_min_s``, one fetch at a time however
many requests wait for it, so a flood of tokens with made-up key ids costs the issuer one request per interval.
A failed fetch keeps the keys held (an identity provider's outage does not log everyone out)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from .config import OAuthConfig
from .fetch import FetchFailed, discover, fetch_json

log = logging.getLogger("gateway.identity")
NO_KEYS_RETRY_S = 1.0  # with no key held yet, how soon a failed fetch is tried again


class IssuerKeys:
    def __init__(self, config: OAuthConfig):
        self.config = config
        self.metadata: dict[str, Any] = {}  # the issuer's discovery document, once read
        self._keys: dict[str | None, PyJWK] = {}
        self._fetched_at = -float("inf")  # the keys' age
        self._tried_at = -float("inf")  # the last attempt, failed or not: what bounds refetches
        self._pending: asyncio.Task[None] | None = None
        self.fetches = 0
        self.last_error: str | None = None  # why the last fetch failed; None once one succeeds

    async def key(self, kid: str | None) -> PyJWK | None:
        """The key a token names (a token without ``kid`` may use the issuer's only key)."""
        now = time.monotonic()
        wait = self.config.jwks.refresh_min_s if self._keys else min(NO_KEYS_RETRY_S, self.config.jwks.refresh_min_s)
        if ((kid not in self._keys or now - self._fetched_at > self.config.jwks.cache_s)
                and now - self._tried_at >= wait):
            await self._refresh()
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _refresh(self) -> None:
        """One fetch, shared by every request that wants it (on this event loop)."""
        pending = self._pending
        if pending is None or pending.done() or pending.get_loop() is not asyncio.get_running_loop():
            self._tried_at = time.monotonic()
            pending = self._pending = asyncio.get_running_loop().create_task(self._fetch())
        await asyncio.shield(pending)

    async def _fetch(self) -> None:
        self.fetches += 1
        bounds = self.config.jwks
        try:
            async with httpx.AsyncClient(follow_redirects=False) as client:
                uri = self.config.jwks_uri or await self._jwks_uri(client)
                document = await fetch_json(client, uri, max_bytes=bounds.max_bytes, timeout_s=bounds.timeout_s)
            self._keys = self._parse(document, uri)
            self._fetched_at = time.monotonic()
            self.last_error = None
        except FetchFailed as exc:
            self.last_error = str(exc)
            log.warning("cannot fetch the signing keys of OAuth issuer %s: %s (keeping %d key(s) held)",
                        self.config.issuer, exc, len(self._keys))

    def status(self) -> dict[str, Any]:
        """For ``/status`` (admins): the keys held, their age, the fetches made and the last failure."""
        age = time.monotonic() - self._fetched_at
        return {"issuer": self.config.issuer, "keys": len(self._keys), "keys_age_s": round(age, 1) if self._keys else None,
                "fetches": self.fetches, "last_error": self.last_error}

    async def _jwks_uri(self, client: httpx.AsyncClient) -> str:
        if not self.metadata:
            self.metadata = await discover(client, self.config.issuer, self.config.jwks.timeout_s)
        uri = self.metadata.get("jwks_uri")
        if not isinstance(uri, str) or urlsplit(uri).scheme not in ("https", "http"):
            raise FetchFailed("the discovery document names no jwks_uri")
        return uri

    def _parse(self, document: dict[str, Any], uri: str) -> dict[str | None, PyJWK]:
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise FetchFailed(f"{uri}: no 'keys' list")
        if len(entries) > self.config.jwks.max_keys:
            raise FetchFailed(f"{uri}: {len(entries)} keys, more than oauth.jwks.max_keys ({self.config.jwks.max_keys})")
        keys: dict[str | None, PyJWK] = {}
        for entry in entries:
            # Signing keys only, and never a shared secret ("oct"): a key anyone could learn must not verify.
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
                continue
            try:
                key = PyJWK(entry)
            except (PyJWKError, ValueError, TypeError, KeyError):  # an algorithm or curve this build cannot use
                continue
            keys[key.key_id] = key
        if not keys:
            raise FetchFailed(f"{uri}: no usable signing key")
        return keys
