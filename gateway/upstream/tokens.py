"""Access tokens the gateway gets for an upstream, per the ``auth:`` of an HTTP binding or an OpenAPI source:

    token_exchange       RFC 8693: the calling person's own token, exchanged at the identity provider for one meant
                         for this upstream (``audience`` / ``resource``, ``scope``): the upstream sees that person,
                         and never the token the caller sent the gateway (MCP forbids passing it through)
    client_credentials   RFC 6749 §4.4: the gateway's own service account
    authorization_code   each person connects their own account at the upstream's authorization server once
                         (``gateway.upstream.connections`` keeps their tokens; this module posts its grants)

Both post to the token endpoint (``token_endpoint``, else the one the ``issuer``'s discovery document names —
by default the ``oauth`` setting's issuer), authenticated as ``client_id`` with ``client_secret`` (a
``{{ secrets.NAME }}``), by HTTP Basic or in the form (``client_auth: post``). A token is kept until shortly before
it expires: exchanged ones per person (by the digest of the caller's token), the service account's once; one
request at a time per key, however many calls wait for it. Tokens and secrets never appear in a message.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from ..identity.fetch import FetchFailed, discover

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
MAX_ANSWER_BYTES = 65_536
MARGIN_S = 30.0  # a token this close to its end is renewed first: it would expire on the way
DEFAULT_LIFETIME_S = 300.0  # a token endpoint that does not say expires_in: kept this long
KEPT = 10_000  # tokens kept, the least recently used forgotten first
TIMEOUT_S = 10.0


class TokenUnavailable(Exception):
    """No token could be had; the message says why for the admin and the model, with no credential in it."""


class TokenRefused(TokenUnavailable):
    """The token endpoint answered with an error (RFC 6749 §5.2): ``error`` its code."""

    def __init__(self, message: str, error: str = ""):
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class AuthSpec:
    """One ``auth:`` declaration, checked (``gateway.bindings.httpauth`` parses it)."""

    grant: str  # "token_exchange" | "client_credentials"
    client_id: str
    secret_name: str  # the environment variable holding the client secret
    token_endpoint: str | None = None
    issuer: str | None = None
    audience: str | None = None
    resource: str | None = None
    scope: str | None = None
    client_auth: str = "basic"  # or "post"
    connection: str | None = None  # authorization_code: the name a person connects under (/oauth/connect/<name>)
    authorization_endpoint: str | None = None  # authorization_code: default, the issuer's discovery document's


@dataclass(frozen=True)
class Issued:
    """A token endpoint's answer (RFC 6749 §5.1), checked."""

    access_token: str
    expires_at: float
    refresh_token: str | None = None
    scope: str | None = None


class TokenSource:
    """Tokens for one ``auth:`` declaration; shared by the calls of a catalog's tools that declare the same."""

    def __init__(self, spec: AuthSpec):
        self.spec = spec
        self._kept: OrderedDict[bytes, tuple[str, float]] = OrderedDict()
        self._pending: dict[bytes, asyncio.Future[Issued]] = {}
        self._metadata: dict[str, Any] | None = None
        # authorization_code: the running gateway's connections (``gateway.upstream.connections``) and its public
        # URL, where the link a person connects at starts; set by the build that declares it.
        self.connections: Any = None
        self.public_url = ""

    async def token(self, client: httpx.AsyncClient, secret: str, subject: str | None) -> str:
        """A token for the upstream; ``subject``: the caller's own token (token exchange), else None."""
        if self.spec.grant != "token_exchange":
            subject = None  # the service account's token is everyone's: never keyed or asked by a person's
        elif subject is None:
            raise TokenUnavailable("it acts as the calling person, whose OAuth access token is exchanged for the "
                                   "upstream's: call it with an access token (an API key has no person's token)")
        key = self._key(subject)
        kept = self._kept.get(key)
        if kept is not None and time.time() < kept[1] - MARGIN_S:
            self._kept.move_to_end(key)
            return kept[0]
        pending = self._pending.get(key)
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            pending = asyncio.get_running_loop().create_task(self._fetch(client, secret, subject))
            self._pending[key] = pending
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        issued = await asyncio.shield(pending)
        token, expires_at = issued.access_token, issued.expires_at
        self._kept[key] = (token, expires_at)
        if len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return token

    def forget(self, subject: str | None) -> None:
        """Drop the token kept for ``subject`` (the upstream refused it): the next call asks for a new one."""
        self._kept.pop(self._key(subject), None)

    def _key(self, subject: str | None) -> bytes:
        return hashlib.sha256((subject or "").encode()).digest()

    async def _fetch(self, client: httpx.AsyncClient, secret: str, subject: str | None) -> Issued:
        spec = self.spec
        form: dict[str, str] = {"grant_type": EXCHANGE if spec.grant == "token_exchange" else "client_credentials"}
        if subject is not None:
            form |= {"subject_token": subject, "subject_token_type": ACCESS_TOKEN,
                     "requested_token_type": ACCESS_TOKEN}
        form |= {name: value for name, value in (("audience", spec.audience), ("resource", spec.resource),
                                                  ("scope", spec.scope)) if value}
        return await self.post(client, secret, form)

    async def post(self, client: httpx.AsyncClient, secret: str, form: dict[str, str]) -> Issued:
        """The token endpoint's answer to the grant ``form``."""
        endpoint = await self.endpoint(client, "token_endpoint")
        started = time.time()
        status, body = await self.send(client, endpoint, secret, form)
        return _issued(endpoint, status, body, started)

    async def send(self, client: httpx.AsyncClient, endpoint: str, secret: str | None,
                   form: dict[str, str]) -> tuple[int, bytes]:
        """POST ``form`` to one of the authorization server's endpoints, the client authenticated as
        ``client_auth`` says (``secret`` None: a public client, named only); its status and (bounded) body."""
        spec = self.spec
        auth = None
        if secret is None:
            form = form | {"client_id": spec.client_id}
        elif spec.client_auth == "post":
            form = form | {"client_id": spec.client_id, "client_secret": secret}
        else:  # RFC 6749 §2.3.1: both form-encoded before they are joined
            auth = httpx.BasicAuth(quote(spec.client_id, safe=""), quote(secret, safe=""))
        try:
            async with asyncio.timeout(TIMEOUT_S), client.stream(
                    "POST", endpoint, data=form, auth=auth, headers={"Accept": "application/json"}) as answer:
                return answer.status_code, await _read(answer)
        except TimeoutError:
            raise TokenUnavailable(f"the endpoint {endpoint} did not answer within {TIMEOUT_S:g} s") from None
        except httpx.HTTPError as exc:
            raise TokenUnavailable(f"the endpoint {endpoint} cannot be reached ({type(exc).__name__})") from None

    async def says(self, client: httpx.AsyncClient, name: str) -> Any:
        """What the issuer's discovery document (read once) says under ``name`` (None: no issuer, or it says
        nothing)."""
        if self.spec.issuer is None:
            return None
        if self._metadata is None:
            try:
                self._metadata = await discover(client, self.spec.issuer, TIMEOUT_S)
            except FetchFailed as exc:
                raise TokenUnavailable(f"the metadata of {self.spec.issuer} cannot be read: {exc}") from None
        return self._metadata.get(name)

    async def endpoint(self, client: httpx.AsyncClient, name: str) -> str:
        """The endpoint ``name`` (``token_endpoint``, ``authorization_endpoint``, ``revocation_endpoint``): as
        declared, else as the issuer's discovery document names it (read once)."""
        declared = getattr(self.spec, name, None)
        if declared:
            return str(declared)
        if self.spec.issuer is None:
            raise TokenUnavailable(f"no {name} is declared and no issuer is known to find one")
        endpoint = await self.says(client, name)
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise TokenUnavailable(f"the discovery document of {self.spec.issuer} names no {name}")
        return endpoint


async def _read(answer: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise TokenUnavailable(f"the token endpoint's answer is larger than {MAX_ANSWER_BYTES:,} bytes")
    return bytes(body)


def _issued(endpoint: str, status: int, body: bytes, started: float) -> Issued:
    """The token, when it expires and what else came with it, from a token endpoint's answer (RFC 6749 §5.1,
    RFC 8693 §2.2)."""
    import json

    try:
        answer: Any = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, Mapping):
        raise TokenUnavailable(f"the token endpoint {endpoint} answered HTTP {status} without a JSON object")
    if status != 200:
        # RFC 6749 §5.2: error and error_description are for the client's developer; never a token.
        error = str(answer.get("error", "unknown error"))[:100]
        description = str(answer.get("error_description", ""))[:300]
        raise TokenRefused(f"the token endpoint {endpoint} refused: {error}" + (f" ({description})" if description else ""),
                           error if status == 400 else "")
    token = answer.get("access_token")
    if not isinstance(token, str) or not token or any(ch in token for ch in "\r\n"):
        raise TokenUnavailable(f"the token endpoint {endpoint} answered without a usable access_token")
    lifetime = answer.get("expires_in")
    # json reads NaN and Infinity too: a lifetime that is not a finite positive number is none said
    if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or not 0 < lifetime < float("inf"):
        lifetime = DEFAULT_LIFETIME_S
    refresh, scope = answer.get("refresh_token"), answer.get("scope")
    return Issued(token, started + float(lifetime),
                  refresh if isinstance(refresh, str) and refresh and len(refresh) <= MAX_ANSWER_BYTES else None,
                  scope[:4096] if isinstance(scope, str) else None)


def checked_issuer(named: str | None, expected: str | None, required: bool) -> None:
    """RFC 9207: an authorization answer that names its issuer names the one asked (a mix-up attack sends the
    code of another server's answer); one that must name it does. ``TokenRefused`` says which was not so."""
    if expected is None:
        return
    if named is None:
        if required:
            raise TokenRefused(f"the authorization server's answer does not name its issuer ({expected} says it "
                               "always does)")
        return
    if named.rstrip("/") != expected.rstrip("/"):
        raise TokenRefused(f"the authorization answer names another issuer than {expected}")
