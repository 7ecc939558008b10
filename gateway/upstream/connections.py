"""Each person's own connection to an upstream (``auth: {authorization_code: …}``): the person authorizes the
gateway once at the upstream's authorization server (authorization code + PKCE, the gateway a confidential client),
and every later call of theirs carries their own access token, refreshed before it expires.

A connection is named (``connection:``, the ``<name>`` of ``/oauth/connect/<name>``); the tools that declare it share
it. Its records, one per (connection, person), hold the tokens sealed with Fernet under a key derived from the
``upstream_oauth_key_secret`` setting (``upstream.oauth.store.fernet``): in cluster mode in the shared state (Redis),
so every replica serves a person connected at any of them; else one file each under ``<state dir>/connections/``.
The person is the OAuth caller, named by issuer and user: an API key is nobody's account.

Who connects is never taken from a link: the link names the connection only, and the browser that opens it signs
in at the gateway's identity provider first (``gateway.server.connections``). Both legs are bound to that browser
(a cookie set when it starts, whose digest each leg's state carries), so a half-done flow forwarded to someone
else — the upstream's authorization request, or the provider's answer — connects nothing: never one person's
upstream account to another person's calls.

In one process a record read is remembered (for ``REVALIDATE_S``: the file may be replaced by a restore); in
cluster mode each call reads it from Redis (one GET, well under a millisecond), so a connection ended at one
replica ends at every replica at once. One replica at a time refreshes a person's token (a GCRA of one per
``REFRESH_WAIT_S`` in the shared state): another that finds it expiring meanwhile waits for the rotated token
instead of spending the same refresh token — which a server that revokes a reused one's whole family would answer
by ending the connection. A refresh that is refused still reads the record again first (another one's rotated
token may be there).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from authlib.oauth2.rfc7636 import create_s256_code_challenge as challenge
from cryptography.fernet import InvalidToken

from .. import secrets as secret_store
from ..state import SharedState
from .oauth.store import EncryptedFileStore, Unreadable, fernet
from .tokens import MARGIN_S, AuthSpec, TokenRefused, TokenSource, TokenUnavailable, checked_issuer

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("gateway.connections")

FLOW_TTL_S = 600.0  # an authorization under way: the person has this long to come back
RECORD_TTL_S = 400 * 86_400.0  # in the shared state: a connection unused this long is forgotten
REVALIDATE_S = 10.0
REFRESH_WAIT_S = 10.0  # how long a replica waits for another's refresh of the same token (then refreshes itself)
REFRESH_POLL_S = 0.1
MAX_REMEMBERED = 10_000
PREFIX = "connection:"
FLOW_PREFIX = "oauth-flow:"
SEALED = "s."  # a state that carries its flow (``sealed_state``) rather than naming a stored one
MAX_STATE_CHARS = 2048
SHOWN = ("connection", "user", "person", "scope", "connected_at", "refreshed_at", "expires_at")  # never a token


class NotConnected(Exception):
    """The person has no usable connection: the message says where to make one."""


class NotAPerson(Exception):
    """The call came without an OAuth access token: there is no person whose connection to use."""


def person(issuer: str, user: str) -> str:
    return f"{issuer} {user}"


@dataclass(frozen=True)
class Declared:
    spec: AuthSpec
    source: TokenSource  # posts to the token endpoint; finds the endpoints


class Connections:
    """The connections of one gateway: what is declared (by the catalog's builds), the sealed records, and the
    authorizations under way (in the shared state too: the browser may come back to another replica)."""

    def __init__(self, state: SharedState, key_secret: str, state_dir: Callable[[], Path], clustered: bool):
        self.state, self.key_secret, self._dir, self.clustered = state, key_secret, state_dir, clustered
        self._declared: dict[str, Declared] = {}
        self._fernet: Any = None
        self._files: EncryptedFileStore | None = None
        self._remembered: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}
        self._refreshing: dict[tuple[str, str], asyncio.Task[str]] = {}

    # -- what the catalog declares -------------------------------------------------------------------------------

    def key_problem(self) -> str | None:
        """Why records cannot be sealed (no key), or None; the key is read from the environment here."""
        if not self.key_secret:
            return ("each person's tokens are kept encrypted: set the setting upstream_oauth_key_secret to the "
                    "name of a secret holding the key")
        try:
            key = secret_store.resolve([self.key_secret])[self.key_secret]
        except secret_store.SecretsMissing as exc:
            return f"setting upstream_oauth_key_secret: {exc}"
        if self._fernet is None:
            self._fernet = fernet(key)
            self._files = EncryptedFileStore(self._dir() / "connections", key)
        return None

    def _ready(self) -> None:
        """Raise ``TokenUnavailable`` unless records can be sealed and unsealed now."""
        problem = self.key_problem()
        if problem is not None:
            raise TokenUnavailable(problem)

    def declare(self, source: TokenSource) -> None:
        name = source.spec.connection
        assert name is not None
        self._declared[name] = Declared(source.spec, source)

    def retain(self, names: set[str | None]) -> None:
        """Forget the declarations of connections not in ``names`` (the catalog swapped in declares no other)."""
        for name in set(self._declared) - names:
            del self._declared[name]

    def declared(self, name: str) -> Declared | None:
        return self._declared.get(name)

    # -- the records ---------------------------------------------------------------------------------------------

    def _key(self, name: str, who: str) -> str:
        return PREFIX + hashlib.sha256(f"{name}\0{who}".encode()).hexdigest()[:40]

    async def _load(self, name: str, who: str) -> dict[str, Any] | None:
        self._ready()
        if self.clustered:
            sealed = await self.state.get(self._key(name, who))
            if sealed is None:
                return None
            record = self._unseal(sealed)
            if record is None:  # tampered with, or sealed under another key: as if none were kept
                log.warning("the tokens kept for connection '%s' cannot be read; the person connects again", name)
                return None
        else:
            assert self._files is not None
            try:
                record = await asyncio.to_thread(self._files.load, name, who)
            except Unreadable as exc:
                log.warning("%s; the person connects again", exc)
                return None
        return record if isinstance(record, dict) and record.get("person") == who else None

    async def keep(self, name: str, who: str, record: dict[str, Any]) -> None:
        """Keep ``record`` as person ``who``'s connection ``name`` (sealed), replacing any."""
        self._ready()
        secret_store.conceal((record.get("access_token"), record.get("refresh_token")), "upstream connection")
        if self.clustered:
            await self.state.put(self._key(name, who), self._fernet.encrypt(json.dumps(record).encode()), RECORD_TTL_S)
        else:
            assert self._files is not None
            await asyncio.to_thread(self._files.save, name, who, record)
        self._remember(name, who, record)

    async def _delete(self, name: str, who: str) -> None:
        self._ready()
        self._remembered.pop((name, who), None)
        if self.clustered:
            await self.state.delete(self._key(name, who))
        else:
            assert self._files is not None
            await asyncio.to_thread(self._files.delete, name, who)

    async def records(self) -> list[dict[str, Any]]:
        """Every connection record, unsealed (for listings: never shown with its tokens)."""
        if self.key_problem() is not None:
            return []
        if self.clustered:
            unsealed = (self._unseal(sealed) for sealed in (await self.state.scan(PREFIX)).values())
            return [record for record in unsealed if record is not None]
        assert self._files is not None
        return await asyncio.to_thread(self._files.records)

    async def listing(self, who: str | None = None) -> list[dict[str, Any]]:
        """The connections (of person ``who``: one read per declared connection; None: everyone's) as listings
        show them: never a token."""
        if who is None:
            records = await self.records()
        elif self.key_problem() is not None:
            records = []
        else:
            loaded = [await self._load(name, who) for name in list(self._declared)]
            records = [record for record in loaded if record is not None]
        records.sort(key=lambda r: (str(r.get("connection")), str(r.get("person"))))
        return [{**{key: record.get(key) for key in SHOWN}, "refreshable": bool(record.get("refresh_token"))}
                for record in records]

    # -- a call's token ------------------------------------------------------------------------------------------

    async def token(self, source: TokenSource, client: httpx.AsyncClient, secret: str, issuer: str | None,
                    user: str | None, link: str) -> str:
        """The person's access token for this connection, refreshed first when it is about to expire."""
        name = source.spec.connection
        assert name is not None
        if issuer is None or user is None:
            raise NotAPerson(f"it acts as the calling person's own account at the upstream, connected under "
                             f"'{name}': call it with an OAuth access token (an API key is nobody's account)")
        self._ready()
        who = person(issuer, user)
        record = await self._current(name, who)
        if record is None:
            raise NotConnected(f"{user} has not connected their account for '{name}' yet: open {link} in a "
                               "browser to connect it, then call again")
        if time.time() < float(record["expires_at"]) - MARGIN_S:
            return str(record["access_token"])
        if not record.get("refresh_token"):
            raise NotConnected(f"the connection of {user} for '{name}' has expired: open {link} to connect again")
        key = (name, who)
        task = self._refreshing.get(key)
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.get_running_loop().create_task(self._refresh(source, client, secret, who, record, link))
            self._refreshing[key] = task
            task.add_done_callback(lambda _: self._refreshing.pop(key, None))
        return await asyncio.shield(task)

    async def _current(self, name: str, who: str) -> dict[str, Any] | None:
        remembered = self._remembered.get((name, who))
        if remembered is not None and time.monotonic() - remembered[1] < REVALIDATE_S:
            return remembered[0]
        record = await self._load(name, who)
        if record is None:
            self._remembered.pop((name, who), None)
        else:
            self._remember(name, who, record)
        return record

    def _remember(self, name: str, who: str, record: dict[str, Any]) -> None:
        if self.clustered:
            return  # another replica may end or refresh it: read each time
        self._remembered[(name, who)] = (record, time.monotonic())
        if len(self._remembered) > MAX_REMEMBERED:
            self._remembered.pop(next(iter(self._remembered)))

    async def _refresh(self, source: TokenSource, client: httpx.AsyncClient, secret: str, who: str,
                       record: dict[str, Any], link: str) -> str:
        name = str(source.spec.connection)
        if self.clustered:
            elsewhere = await self._refreshed_elsewhere(name, who, record)
            if elsewhere is not None:
                if not elsewhere:
                    raise NotConnected(f"the connection for '{name}' was ended meanwhile: open {link} to connect "
                                       "again")
                if time.time() < float(elsewhere["expires_at"]):
                    return str(elsewhere["access_token"])
                record = elsewhere  # refreshed there, and expired already: refreshed again with its rotated token
        form = {"grant_type": "refresh_token", "refresh_token": str(record["refresh_token"])}
        form |= {key: str(value) for key, value in (("scope", record.get("scope")),
                                                    ("resource", source.spec.resource)) if value}
        try:
            issued = await source.post(client, secret, form)
        except TokenRefused as exc:
            again = await self._load(name, who)  # another replica may have refreshed (and rotated) it meanwhile
            if again is not None and again.get("refresh_token") != record.get("refresh_token"):
                self._remember(name, who, again)
                if time.time() < float(again["expires_at"]) - MARGIN_S:
                    return str(again["access_token"])
            if exc.error != "invalid_grant":  # the server's trouble (or ours), not the grant's end: kept
                raise
            if again is not None and again.get("refresh_token") == record.get("refresh_token"):
                await self._delete(name, who)  # still the grant refused: the person connects again
            raise NotConnected(f"the connection for '{name}' was refused by its authorization server ({exc}): "
                               f"open {link} to connect again") from None
        await self.keep(name, who, {**record, "access_token": issued.access_token, "expires_at": issued.expires_at,
                                     "refresh_token": issued.refresh_token or record["refresh_token"],
                                     "scope": issued.scope or record.get("scope"), "refreshed_at": time.time()})
        return issued.access_token

    async def _refreshed_elsewhere(self, name: str, who: str, record: dict[str, Any]) -> dict[str, Any] | None:
        """None when this replica is the one to refresh ``record`` now; else the record once another replica
        refreshed it (``{}`` when the connection ended meanwhile), or None if it did not within the wait."""
        wait = await self.state.acquire("refresh-" + self._key(name, who), 1, REFRESH_WAIT_S)
        if wait <= 0:
            return None
        deadline = time.monotonic() + min(wait, REFRESH_WAIT_S)
        while time.monotonic() < deadline:
            await asyncio.sleep(REFRESH_POLL_S)
            again = await self._load(name, who)
            if again is None:
                return {}
            if again.get("refresh_token") != record.get("refresh_token"):
                return again
        return None

    # -- connecting, and ending a connection ---------------------------------------------------------------------

    async def begin(self, declared: Declared, client: httpx.AsyncClient, who: str, user: str,
                    redirect_uri: str, browser: str) -> str:
        """The authorization request to send the person's browser to (``TokenUnavailable`` says why none)."""
        spec = declared.spec
        endpoint = await declared.source.endpoint(client, "authorization_endpoint")
        verifier = secrets.token_urlsafe(48)
        state = await self.remember_flow({"kind": "connect", "connection": spec.connection, "person": who,
                                          "user": user, "verifier": verifier, "redirect_uri": redirect_uri,
                                          "browser": browser})
        query = {"response_type": "code", "client_id": spec.client_id, "redirect_uri": redirect_uri,
                 "state": state, "code_challenge": challenge(verifier), "code_challenge_method": "S256"}
        query |= {name: value for name, value in (("scope", spec.scope), ("resource", spec.resource)) if value}
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"

    async def finish(self, flow: dict[str, Any], client: httpx.AsyncClient, code: str, issuer: str | None) -> None:
        """Exchange the code the browser came back with (``issuer``: the answer's ``iss``, RFC 9207) for the
        person's tokens, and keep them."""
        name = str(flow["connection"])
        declared = self._declared.get(name)
        if declared is None:
            raise TokenUnavailable(f"no tool declares the connection '{name}' any more")
        spec = declared.spec
        checked_issuer(issuer, spec.issuer,
                       await declared.source.says(client, "authorization_response_iss_parameter_supported") is True)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": str(flow["redirect_uri"]),
                "code_verifier": str(flow["verifier"]), "client_id": spec.client_id}
        if spec.resource:
            form["resource"] = spec.resource
        issued = await declared.source.post(client, _client_secret(spec), form)
        now = time.time()
        await self.keep(name, str(flow["person"]), {
            "connection": name, "person": flow["person"], "user": flow["user"], "access_token": issued.access_token,
            "refresh_token": issued.refresh_token, "expires_at": issued.expires_at,
            "scope": issued.scope or spec.scope, "connected_at": now, "refreshed_at": now})
        log.info("connection '%s': %s connected their account", name, flow["user"])

    async def revoke(self, name: str, who: str, client: httpx.AsyncClient) -> bool:
        """End a person's connection: forgotten here, and its refresh token revoked at the authorization server
        where it names a revocation endpoint (RFC 7009). Whether there was one."""
        if self.key_problem() is not None:
            return False  # nothing can have been kept
        record = await self._load(name, who)
        await self._delete(name, who)
        if record is None:
            return False
        declared = self._declared.get(name)
        hint = "refresh_token" if record.get("refresh_token") else "access_token"
        if declared is not None and record.get(hint):
            try:
                endpoint = await declared.source.endpoint(client, "revocation_endpoint")
                status, _ = await declared.source.send(client, endpoint, _client_secret(declared.spec),
                                                       {"token": str(record[hint]), "token_type_hint": hint})
                if status != 200:
                    log.warning("connection '%s': the authorization server answered HTTP %d to the revocation of "
                                "%s's token", name, status, record.get("user"))
            except TokenUnavailable as exc:
                log.info("connection '%s': not revoked at the authorization server (%s)", name, exc)
        return True

    # -- the authorizations under way ----------------------------------------------------------------------------

    def sealed_state(self, flow: dict[str, Any]) -> str:
        """A ``state`` that is ``flow`` itself, sealed (it holds a PKCE verifier) and dated: for the sign-in leg,
        which anyone may start, so that starting one stores nothing — a flood of anonymous starts fills no
        memory and evicts nothing. Its code is the identity provider's to take once."""
        self._ready()
        return SEALED + self._fernet.encrypt(json.dumps(flow).encode()).decode()

    async def remember_flow(self, flow: dict[str, Any]) -> str:
        """Keep ``flow`` (sealed: it holds a PKCE verifier) under a new ``state``, for ``FLOW_TTL_S``, used once:
        for the upstream leg, which only a person signed in at the identity provider reaches."""
        self._ready()
        state = secrets.token_urlsafe(32)
        await self.state.put(FLOW_PREFIX + digest(state), self._fernet.encrypt(json.dumps(flow).encode()),
                             FLOW_TTL_S)
        return state

    async def take_flow(self, state: str) -> dict[str, Any] | None:
        """The flow kept under ``state``, once (None: unknown, used, or expired)."""
        if not state or len(state) > MAX_STATE_CHARS or self.key_problem() is not None:
            return None
        if state.startswith(SEALED):
            return self._unseal(state[len(SEALED):].encode(), int(FLOW_TTL_S))
        sealed = await self.state.take(FLOW_PREFIX + digest(state))
        if sealed is None:
            return None
        return self._unseal(sealed, int(FLOW_TTL_S))

    def _unseal(self, sealed: bytes, ttl: int | None = None) -> dict[str, Any] | None:
        """The record sealed in ``sealed``, or None when it cannot be read (changed, another key, too old)."""
        try:
            record = json.loads(self._fernet.decrypt(sealed, ttl=ttl))
        except (InvalidToken, ValueError):
            return None
        return record if isinstance(record, dict) else None


def digest(text: str) -> str:
    """What is kept of a ``state`` or a browser's cookie: never the value itself."""
    return hashlib.sha256(text.encode()).hexdigest()


def _client_secret(spec: AuthSpec) -> str:
    try:
        return secret_store.resolve([spec.secret_name])[spec.secret_name]
    except secret_store.SecretsMissing as exc:
        raise TokenUnavailable(str(exc)) from None
