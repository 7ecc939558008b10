"""The gateway the real-client tests sign in to: people's tools (whoami, a finance ledger, a support queue, and
my_deals, which reaches a CRM with each person's exchanged token), the rules that hand them out by groups, and the
CRM, which checks each token it gets and records whose it is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt
from identity.idp import IdentityProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support import free_socket, serving

from gateway.identity.config import parse
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

TOOLS = """\
tools:
  - id: whoami
    name: Who am I
    user_description: Says who the gateway thinks is calling.
    ai_description: Returns the caller as the gateway sees it.
    binding: {{python: people:whoami}}
    toolsets: [common]
  - id: ledger
    name: Ledger
    user_description: The finance ledger.
    ai_description: Reads the ledger.
    binding: {{python: people:ledger}}
    toolsets: [finance]
  - id: tickets
    name: Tickets
    user_description: The support queue.
    ai_description: Reads the support queue.
    binding: {{python: people:tickets}}
    toolsets: [support]
  - id: my_deals
    name: My deals
    user_description: The caller's deals at the CRM.
    ai_description: Returns the caller's deals.
    toolsets: [common]
    binding:
      http:
        url: {crm}/deals
        auth:
          token_exchange: {{client_id: gateway, client_secret: "{{{{ secrets.GATEWAY_SECRET }}}}", resource: {crm}}}
"""
CODE = '''\
def whoami(context) -> dict:
    return {"user": context.user, "caller": context.caller, "client_id": context.client_id}


def ledger() -> str:
    return "ledger"


def tickets() -> str:
    return "tickets"
'''
RULES = [{"scope": "tools", "toolsets": ["common"]},
         {"groups": ["finance"], "toolsets": ["finance"]},
         {"groups": ["support"], "toolsets": ["support"]},
         {"roles": ["gateway-admin"], "admin": True, "toolsets": "*"}]


class Crm:
    """An upstream API protected by the same identity provider: it checks each token's signature and audience
    (itself) and records whose it is."""

    def __init__(self, idp: IdentityProvider):
        self.keys = jwt.PyJWKClient(idp.jwks_url)
        self.issuer = idp.issuer
        self.url = ""
        self.seen: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def deals(request: Request) -> JSONResponse:
            token = request.headers.get("authorization", "").removeprefix("Bearer ")
            key = self.keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=["RS256", "ES256"], audience=self.url, issuer=self.issuer)
            self.seen.append({"sub": claims["sub"], "aud": claims["aud"], "act": claims.get("act"), "token": token})
            return JSONResponse({"deals_of": claims["sub"]})

        return Starlette(routes=[Route("/deals", deals)])


@contextmanager
def gateway_and_crm(idp: IdentityProvider, root: Path, rules: list[dict[str, Any]] | None = None,
                    ) -> Iterator[tuple[str, Crm]]:
    """The gateway on a port chosen first (its audience is its own URL, as a client checks), and the CRM; ``rules``
    replace ``RULES``."""
    crm = Crm(idp)
    with serving(crm.app()) as crm_server:
        crm.url = crm_server.url
        (root / "people.yaml").write_text(TOOLS.format(crm=crm.url), encoding="utf-8")
        (root / "python").mkdir(exist_ok=True)
        (root / "python" / "people.py").write_text(CODE, encoding="utf-8")
        sock = free_socket()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        oauth = parse({"issuer": idp.issuer, "audience": url, "rules": rules or RULES, "required_scopes": ["tools"]})
        gateway = Gateway(Settings(definitions=root, reload=False, oauth=oauth))
        with serving(create_app(gateway), lifespan="on", sock=sock):
            yield url, crm
