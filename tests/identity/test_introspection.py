"""Opaque access tokens checked by RFC 7662 introspection at a real authorization server (oidc-provider issuing
opaque tokens for the gateway's resource): an active token for the gateway passes and earns its user's tools; a
revoked one stops passing once the remembered answer is older than cache_s; a token for another resource, and a
made-up one, are refused."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from identity.idp import confidential_client, needs_idp, running_idp
from support import free_socket, serving

from gateway.identity.config import parse
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

pytestmark = needs_idp

TOOLS = """\
tools:
  - id: ledger
    name: Ledger
    user_description: The finance ledger.
    ai_description: Reads the ledger.
    binding: {python: people:ledger}
    toolsets: [finance]
"""


def test_opaque_tokens_are_introspected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "people.yaml").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "d" / "python").mkdir()
    (tmp_path / "d" / "python" / "people.py").write_text("def ledger() -> str:\n    return 'ledger'\n")
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app_client = confidential_client("app")
    resource_server = confidential_client("gateway-rs")
    with running_idp(tmp_path / "idp.log", clients=[app_client, resource_server],
                     resources={url: {"format": "opaque"}}) as idp:
        monkeypatch.setenv("RS_SECRET", resource_server["client_secret"])
        oauth = parse({"issuer": idp.issuer, "audience": url, "rules": [{"groups": ["finance"], "toolsets": ["finance"]}],
                       "introspection": {"client_id": "gateway-rs", "client_secret": "{{ secrets.RS_SECRET }}",
                                         "cache_s": 0}})
        gateway = Gateway(Settings(definitions=tmp_path / "d", reload=False, oauth=oauth))
        with serving(create_app(gateway), lifespan="on", sock=sock):
            tokens = idp.authorize(app_client, user="alice", resource=url)
            opaque = tokens["access_token"]
            assert opaque.count(".") != 2  # not a JWT: only introspection can tell what it is
            listed = httpx.get(f"{url}/tools", headers={"Authorization": f"Bearer {opaque}"})
            assert listed.status_code == 200 and [t["id"] for t in listed.json()["tools"]] == ["ledger"]
            revoked = idp.http.post("/token/revocation", data={"token": opaque}, auth=("app", app_client["client_secret"]))
            assert revoked.status_code == 200
            after = httpx.get(f"{url}/tools", headers={"Authorization": f"Bearer {opaque}"})
            assert after.status_code == 401 and "not active" in after.json()["error"]
            elsewhere = idp.authorize(app_client, user="alice", resource="http://127.0.0.1:9/other")["access_token"]
            refused = httpx.get(f"{url}/tools", headers={"Authorization": f"Bearer {elsewhere}"})
            assert refused.status_code == 401
            made_up = httpx.get(f"{url}/tools", headers={"Authorization": "Bearer made-up-opaque-token"})
            assert made_up.status_code == 401 and "not active" in made_up.json()["error"]
