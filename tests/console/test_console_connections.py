"""The catalog page lists the accounts people connected to upstreams (``auth: {authorization_code}``) — who, which
connection, the scope, when, whether it refreshes — and never a token; an admin ends one with its End button
(after a confirmation), and it is gone from the gateway as well as from the page."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_support import ADMIN_KEY, check_page, sign_in
from playwright.async_api import Page, expect
from support import RunningServer, running

from gateway.settings import ApiKey, hash_key

in_browser = pytest.mark.asyncio(loop_scope="session")
TOOLS = Path(__file__).resolve().parent / "tools"
CONNECTION = """\
tools:
  - id: crm_me
    name: My CRM account
    user_description: Who the CRM thinks the caller is.
    ai_description: Returns the caller's CRM account.
    binding:
      http:
        url: https://crm.example/api/me
        auth:
          authorization_code:
            connection: crm
            client_id: gateway-crm
            client_secret: "{{ secrets.CRM_SECRET }}"
            authorization_endpoint: https://login.crm.example/authorize
            token_endpoint: https://login.crm.example/token
"""
TOKENS = ("eyJ-alice-access-token", "alice-refresh-token", "eyJ-bob-access-token")


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    monkeypatch.setenv("CRM_SECRET", "crm-secret")
    monkeypatch.setenv("CONNECTIONS_KEY", "the-key-that-seals-connections")
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    definitions = tmp_path / "tools"
    shutil.copytree(TOOLS, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    (definitions / "crm.yaml").write_text(CONNECTION, encoding="utf-8")
    keys = (ApiKey(name="admin", sha256=hash_key(ADMIN_KEY), admin=True),)
    with running(definitions, api_keys=keys, upstream_oauth_key_secret="CONNECTIONS_KEY") as served:
        yield served


async def _connected(served: RunningServer, user: str, access: str, refresh: str | None) -> None:
    """A record as a finished authorization leaves it (the flow itself is tests/oauth/test_connections.py's)."""
    now = time.time()
    who = f"https://idp.example {user}"
    await served.gateway.connections().keep("crm", who, {
        "connection": "crm", "person": who, "user": user, "access_token": access, "refresh_token": refresh,
        "expires_at": now + 3600, "scope": "contacts", "connected_at": now, "refreshed_at": now})


@in_browser
async def test_connected_accounts_are_listed_without_tokens_and_ended(page: Page, served: RunningServer):
    await _connected(served, "alice", TOKENS[0], TOKENS[1])
    await _connected(served, "bob", TOKENS[2], None)
    await sign_in(page, served.url)
    section = page.get_by_role("region", name="Connected accounts table")
    await expect(section.get_by_role("row")).to_have_count(3)  # the header and two people
    await expect(section.get_by_role("row", name="alice")).to_contain_text("contacts")
    await expect(section.get_by_role("row", name="bob")).to_contain_text("no")  # no refresh token
    content = await page.content()
    assert not [token for token in TOKENS if token in content]
    await check_page(page, "connections")

    page.once("dialog", lambda dialog: dialog.accept())
    await section.get_by_role("button", name="End bob's connection crm").click()
    await expect(page.get_by_role("status").filter(has_text="Ended bob's connection 'crm'")).to_be_visible()
    await expect(section.get_by_role("row")).to_have_count(2)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
        listed = (await client.get(f"{served.url}/admin/api/connections")).json()["connections"]
    assert [c["user"] for c in listed] == ["alice"]

    page.once("dialog", lambda dialog: dialog.dismiss())  # changing one's mind ends nothing
    await section.get_by_role("button", name="End alice's connection crm").click()
    await expect(section.get_by_role("row")).to_have_count(2)
