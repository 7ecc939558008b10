"""What the resource-server tests share: the tools people call, the rules that give them toolsets, the
gateway's resource URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

TOOLS = """\
tools:
  - id: whoami
    name: Who am I
    user_description: Says who the gateway thinks is calling.
    ai_description: Returns the caller as the gateway sees it.
    binding: {python: people:whoami}
    toolsets: [common]
  - id: pay
    name: Pay
    user_description: Pays.
    ai_description: Pays an amount.
    binding: {python: people:pay}
    toolsets: [finance]
  - id: ticket
    name: Ticket
    user_description: Opens a ticket.
    ai_description: Opens a support ticket.
    binding: {python: people:ticket}
    toolsets: [support]
"""
CODE = '''\
def whoami(context) -> dict:
    return {"user": context.user, "caller": context.caller, "client_id": context.client_id,
            "issuer": context.issuer}


def pay(amount: float) -> str:
    return f"paid {amount}"


def ticket(title: str) -> str:
    return f"opened {title}"
'''
# The gateway's resource URL: an identifier that tokens must name, not where the test server listens.
AUDIENCE = "http://127.0.0.1/gateway"
RULES = [{"scope": "finance", "toolsets": ["finance"]},
         {"groups": ["support"], "toolsets": ["support"]},
         {"scope": "tools", "toolsets": ["common"]},
         {"roles": ["gateway-admin"], "admin": True, "toolsets": "*"}]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class BearerApi:
    """An upstream API: ``GET /me`` checks the bearer token against ``issuer``'s key for ``audience`` and answers
    ``shown(claims)``, with the Authorization it got under ``echo`` when asked (``?echo=1``). ``seen``: every
    Authorization sent to it."""

    def __init__(self, issuer: Any, audience: str, shown: Callable[[dict[str, Any]], dict[str, Any]]):
        self.issuer, self.audience, self.shown = issuer, audience, shown
        self.seen: list[str] = []

    def app(self) -> Starlette:
        async def me(request: Request) -> JSONResponse:
            sent = request.headers.get("authorization", "")
            self.seen.append(sent)
            try:
                claims = jwt.decode(sent.removeprefix("Bearer "), self.issuer.keys[0].private.public_key(),
                                    algorithms=["RS256"], audience=self.audience, issuer=self.issuer.url)
            except jwt.InvalidTokenError as exc:
                return JSONResponse({"error": str(exc)}, 401)
            return JSONResponse({**self.shown(claims), "echo": sent if request.query_params.get("echo") else None})

        return Starlette(routes=[Route("/me", me)])


def link(text: str, url: str) -> str:
    """The connect link an error result gives, made to reach the test's gateway (its audience is not where it
    listens)."""
    start = text.index(f"{AUDIENCE}/oauth/connect/")
    return url + text[start + len(AUDIENCE):].split()[0]


def connect(link: str, issuer: Any, crm: Any, person: str, account: str) -> httpx.Response:
    """A browser (its own cookie jar) signed in as ``person`` at the gateway's identity provider and as
    ``account`` at the CRM's opens ``link``; every redirect followed by hand. The last answer (the gateway's
    page)."""
    issuer.signed_in, crm.signed_in = person, account
    hops = []
    with httpx.Client() as browser:
        answer = browser.get(link)
        while answer.status_code in (302, 303):
            hops.append(urlsplit(answer.headers["location"]))
            answer = browser.get(answer.headers["location"])
    assert [(hop.netloc, hop.path) for hop in hops] == [
        (urlsplit(issuer.url).netloc, "/authorize"), (urlsplit(link).netloc, "/oauth/callback"),
        (urlsplit(crm.url).netloc, "/authorize"), (urlsplit(link).netloc, "/oauth/callback")]
    return answer
