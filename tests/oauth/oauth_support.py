"""What the resource-server tests share: the tools people call, the rules that give them toolsets, the
gateway's resource URL."""

from __future__ import annotations

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
