"""One upstream's OAuth client for one principal: the token its connection sends, what it does when the upstream
refuses it, and the authorization-code flow an admin's browser drives.

``Bearer`` is the ``httpx2.Auth`` of the connection's HTTP client: every request carries the current access token
(refreshed first when it is about to expire). A 401 is answered by a refresh (or, for a grant the gateway asks
alone — client credentials, cross-app access — a new token) and the request sent once more; a 403
``insufficient_scope`` (step-up) by a token for the scopes held and those the challenge names — asked at once by
such a grant, else by an admin's new authorization. Step-ups are bounded (``MAX_STEP_UPS`` in a row without a request getting through), and none is
offered when the challenge names only scopes already granted: a server that never accepts is not asked forever.

A refusal the admin can mend (no token, a refresh refused, more scope) is marked on its request
(``CONNECT_EXTENSION``: the path of ``GET /oauth/connect/<source>``), which ``gateway.upstream.mcp.refusals``
tells in the source's status and in a call's error. The authorization request (``begin``) is made when the admin
opens that path: discovery, the client (``registration``), the scope — the declared one, else the last
challenge's, else the protected resource's ``scopes_supported`` (with ``offline_access`` where the server lists
it), else none — and PKCE; ``finish`` exchanges the code.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.utils import (
    extract_field_from_www_auth,
    get_client_metadata_scopes,
    union_scopes,
    validate_authorization_response_iss,
)

from ... import secrets as secret_store
from . import registration, tokens
from .config import AUTHORIZATION_CODE, CONNECT_EXTENSION, CROSS_APP_ACCESS, GATEWAY, OAuthClient
from .discovery import Discovered, discover
from .errors import DiscoveryFailed, TokenFailed
from .store import TokenStore, Unreadable
from .tokens import Credentials, Token

log = logging.getLogger("gateway.upstream_oauth")

MAX_STEP_UPS = 2
GRANT_TYPES = ["authorization_code", "refresh_token"]  # what an authorization-code client of the gateway uses


@dataclass
class Flow:
    """One authorization the admin's browser is making: bound to its ``state``, used once."""

    authorizer: Authorizer
    state: str
    verifier: str
    redirect_uri: str
    scope: str | None
    discovered: Discovered
    client: registration.Client
    url: str  # the authorization request the browser is sent to
    expires_at: float = 0.0


class Authorizer:
    def __init__(self, source: str, server_url: str, declaration: OAuthClient, store: Callable[[], TokenStore],
                 secrets: Callable[[], dict[str, str]], principal: str = GATEWAY):
        self.source, self.server_url, self.declaration, self.principal = source, server_url, declaration, principal
        self._store, self._secrets = store, secrets
        self._lock = threading.Lock()  # the token and challenge; the build's thread and the gateway's loop share it
        self._token: Token | None = None
        self._loaded = False
        self._resource_metadata: str | None = None  # named by the last challenge
        self._discovered: Discovered | None = None  # what the last discovery found, for refreshes
        self._challenged: str | None = None  # the scope the last challenge named
        self._wanted: str | None = None  # the scope a step-up asks for
        self.step_ups = 0
        self.auth = Bearer(self)

    @property
    def interactive(self) -> bool:
        return self.declaration.grant == AUTHORIZATION_CODE

    @property
    def connect_path(self) -> str:
        return f"/oauth/connect/{self.source}"

    # -- the token ---------------------------------------------------------------------------------------------

    def token(self) -> Token | None:
        with self._lock:
            if not self._loaded:
                self._loaded = True
                self._token = Token.from_record((self._record() or {}).get("token"))
            return self._token

    def _record(self) -> dict | None:
        """What is kept for this source and principal, unless it was kept for another server (the source's url
        changed since: its client and tokens are that server's)."""
        try:
            record = self._store().load(self.source, self.principal)
        except Unreadable as exc:  # as if none were kept: the next authorization writes a good one
            log.warning("%s; an admin authorizes the gateway again at %s", exc, self.connect_path)
            return None
        return record if record is not None and record.get("server") == self.server_url else None

    async def _discover(self) -> Discovered:
        if self._discovered is None:
            self._discovered = await discover(self.server_url, self._resource_metadata)
        return self._discovered

    def _keep(self, token: Token | None, client: registration.Client | None = None) -> None:
        if token is not None:
            secret_store.conceal((token.access_token, token.refresh_token,
                                  client.client_secret if client is not None else None), "upstream oauth")
        with self._lock:
            self._token, self._loaded = token, True
        record = self._record() or {}
        record["token"] = token.as_record() if token is not None else None
        if client is not None and client.client_id != self.declaration.client_id:
            record["client"] = client.as_record()  # a registered one, kept for the next flow and refreshes
        record["server"] = self.server_url
        self._store().save(self.source, self.principal, record)

    def _kept_client(self) -> registration.Client | None:
        return registration.Client.from_record((self._record() or {}).get("client"))

    async def bearer(self) -> str | None:
        """The access token to send now: the kept one, refreshed first when it is about to expire."""
        token = self.token()
        if token is None or token.fresh():
            return token.access_token if token is not None else None
        if token.refresh_token is not None and await self._refreshed(token):
            return self._token.access_token if self._token is not None else None
        return None if self.interactive else await self._unattended()

    async def _refreshed(self, token: Token) -> bool:
        try:
            discovered = await self._discover()
            credentials = self._credentials(discovered, self._client(discovered))
            self._keep(await tokens.refresh(discovered, credentials, token))
            return True
        except (DiscoveryFailed, TokenFailed) as exc:
            log.info("MCP server '%s': the gateway's OAuth token could not be refreshed: %s", self.source, exc)
            self._discovered = None
            self._keep(None)
            return False

    async def _unattended(self) -> str | None:
        """A token the gateway asks for alone: client credentials, or cross-app access (SEP-990)."""
        try:
            discovered = await self._discover()
            credentials = self._credentials(discovered, self._client(discovered))
            scope = self._scope(discovered, [])
            if self.declaration.grant == CROSS_APP_ACCESS:
                token = await tokens.cross_app_access(discovered, credentials, scope, self._identity_provider())
            else:
                token = await tokens.client_credentials(discovered, credentials, scope)
        except (DiscoveryFailed, TokenFailed) as exc:
            log.warning("MCP server '%s': no OAuth token for the gateway: %s", self.source, exc)
            self._discovered = None
            return None
        self._keep(token)
        return token.access_token

    def _client(self, discovered: Discovered) -> registration.Client:
        secrets = self._secrets()
        if self.declaration.client_id is not None:
            return registration.declared(self.declaration, secrets["client_id"], "client_secret" in secrets,
                                         discovered)
        kept = self._kept_client()
        if kept is None:
            raise DiscoveryFailed("the gateway holds no client registered with its authorization server")
        return kept

    def _credentials(self, discovered: Discovered, client: registration.Client) -> Credentials:
        secrets = self._secrets()
        return Credentials(client, client.client_secret or secrets.get("client_secret"), secrets.get("private_key"),
                           self.declaration.signing_alg)

    def _identity_provider(self) -> tokens.IdentityProvider:
        secrets, declared = self._secrets(), self.declaration
        return tokens.IdentityProvider(declared.idp_token_endpoint, declared.idp_issuer, secrets.get("idp_client_id"),
                                       secrets.get("idp_client_secret"), secrets.get("idp_id_token", ""))

    def _scope(self, discovered: Discovered, grant_types: list[str]) -> str | None:
        if self.declaration.scopes:
            chosen: str | None = " ".join(self.declaration.scopes)
        else:
            chosen = get_client_metadata_scopes(self._challenged, discovered.resource_metadata, discovered.metadata,
                                                grant_types)
        return union_scopes(chosen, self._wanted)

    # -- refusals ----------------------------------------------------------------------------------------------

    async def refused(self, response: httpx2.Response, sent: str | None) -> bool:
        """Whether the request the upstream refused (401, 403) is to be sent again with a new token; marks it
        with the connect path when an admin's authorization would mend it."""
        named = extract_field_from_www_auth(response, "resource_metadata")
        scope = extract_field_from_www_auth(response, "scope")
        step_up = response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"
        if named is not None and named != self._resource_metadata:
            self._discovered = None  # the upstream names other metadata now: found again when next needed
        if response.status_code == 401:
            self._resource_metadata = named or self._resource_metadata
            self._challenged = scope or self._challenged
            token = self.token()
            if token is not None and token.access_token == sent:
                if token.refresh_token is not None and await self._refreshed(token):
                    return True
                self._keep(None)
            if not self.interactive:
                return await self._unattended() is not None
            self.mark(response.request)
            return False
        if not step_up:
            return False
        self._resource_metadata = named or self._resource_metadata
        token = self.token()
        granted = set((token.scope or "").split()) if token is not None else set()
        if not scope or set(scope.split()) <= granted or self.step_ups >= MAX_STEP_UPS:
            return False  # more authorizations would not get more than was granted
        self.step_ups += 1
        self._wanted = union_scopes(union_scopes(self._wanted, token.scope if token else None), scope)
        if not self.interactive:
            return await self._unattended() is not None
        self.mark(response.request)
        return False

    def mark(self, request: httpx2.Request) -> None:
        """Mark ``request``: if refused, an admin's authorization would mend it."""
        request.extensions = {**request.extensions, CONNECT_EXTENSION: self.connect_path}

    def succeeded(self) -> None:
        self.step_ups = 0

    # -- the authorization-code flow ---------------------------------------------------------------------------

    async def begin(self, redirect_uri: str) -> Flow:
        """The authorization request for the admin's browser (``DiscoveryFailed``, ``TokenFailed`` say why not)."""
        self._discovered = discovered = await discover(self.server_url, self._resource_metadata)
        if self.declaration.client_id is not None:
            client = self._client(discovered)
        else:
            client = await registration.obtain(self.declaration, discovered, redirect_uri, self._kept_client())
        scope = self._scope(discovered, GRANT_TYPES)
        url, state, verifier = await tokens.authorization_url(discovered, client, redirect_uri, scope)
        return Flow(self, state, verifier, redirect_uri, scope, discovered, client, url)

    async def finish(self, flow: Flow, code: str | None, issuer: str | None) -> None:
        """The tokens of the authorization the browser came back from (``TokenFailed`` says why none)."""
        try:
            validate_authorization_response_iss(issuer, flow.discovered.metadata)  # RFC 9207
        except OAuthFlowError as exc:
            raise TokenFailed(str(exc)) from None
        if not code:
            raise TokenFailed("the authorization server sent the browser back without a code")
        credentials = self._credentials(flow.discovered, flow.client)
        token = await tokens.exchange(flow.discovered, credentials, flow.redirect_uri, code, flow.verifier, flow.scope)
        self._keep(token, flow.client)
        log.info("MCP server '%s': the gateway is authorized (scope %s)", self.source, token.scope or "not named")


class Bearer(httpx2.Auth):
    """The connection's side of an ``Authorizer`` (see the module's docstring)."""

    def __init__(self, authorizer: Authorizer):
        self.authorizer = authorizer

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = await self.authorizer.bearer()
        if sent is not None:
            request.headers["Authorization"] = f"Bearer {sent}"
        elif self.authorizer.interactive:  # marked before it is sent: the session's hooks read a refusal at once
            self.authorizer.mark(request)
        response = yield request
        if response.status_code in (401, 403) and await self.authorizer.refused(response, sent):
            again = await self.authorizer.bearer()
            if again is not None:
                request.headers["Authorization"] = f"Bearer {again}"
                response = yield request
                if response.status_code in (401, 403):
                    await self.authorizer.refused(response, again)
        if response.status_code < 400:
            self.authorizer.succeeded()
