"""Fixtures for the resource-server tests: a programmable issuer (issuer.py) and a gateway that accepts its tokens
under rules that give people different toolsets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from issuer import Issuer, issuing
from support import RunningServer, running

from gateway.identity.config import parse

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


@pytest.fixture(scope="module")
def definitions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("people")
    (root / "people.yaml").write_text(TOOLS, encoding="utf-8")
    (root / "python").mkdir()
    (root / "python" / "people.py").write_text(CODE, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with issuing() as issuer:
        yield issuer


@pytest.fixture
def gateway_for(definitions: Path) -> Callable[..., AbstractContextManager[RunningServer]]:
    """``with gateway_for(issuer, **oauth_settings) as served``: a gateway accepting ``issuer``'s tokens."""

    @contextmanager
    def serve(issuer: Issuer, *, settings: dict[str, Any] | None = None, **oauth: Any) -> Iterator[RunningServer]:
        config = parse({"issuer": issuer.url, "audience": AUDIENCE, "rules": RULES,
                        "jwks": {"refresh_min_s": 0, "timeout_s": 2}, **oauth})
        with running(definitions, oauth=config, **(settings or {})) as served:
            yield served

    return serve


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
