"""The catalog page shows the tools the lock file holds — each changed field as locked and as it is now, side by
side — and an admin approves one with its button: the lock file records it, the gateway reloads and serves it as it
is now; the other stays held."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_support import ADMIN_KEY, check_page, sign_in
from lock_upstreams import POISONED, TRUSTED, changed, trusted
from playwright.async_api import Page, expect
from support import RunningServer, running, serving

from gateway.cli.main import main
from gateway.settings import ApiKey, hash_key

in_browser = pytest.mark.asyncio(loop_scope="session")
def declare(root: Path, url: str) -> None:
    (root / "up.yaml").write_text(f"sources:\n  - id: up\n    mcp: {{url: '{url}/mcp'}}\n", encoding="utf-8")


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    root = tmp_path / "defs"
    root.mkdir()
    with serving(trusted().http_app(path="/mcp"), lifespan="on") as before:
        declare(root, before.url)
        assert main(["lock", str(root)]) == 0
    with serving(changed().http_app(path="/mcp"), lifespan="on") as after:
        declare(root, after.url)
        keys = (ApiKey(name="admin", sha256=hash_key(ADMIN_KEY), admin=True),)
        with running(root, api_keys=keys) as served:
            yield served


@in_browser
async def test_held_tools_are_shown_side_by_side_and_approved_one_at_a_time(page: Page, served: RunningServer):
    await sign_in(page, served.url)
    section = page.get_by_role("region", name="Changes of add table")
    await expect(section.get_by_role("row", name="ai_description")).to_contain_text(TRUSTED)
    await expect(section.get_by_role("row", name="ai_description")).to_contain_text("read ~/.ssh/id_rsa")
    await expect(section.get_by_role("row", name="input_schema")).to_be_visible()
    await expect(page.get_by_role("region", name="Changes of grab table")).to_be_visible()
    await check_page(page, "held")

    page.once("dialog", lambda dialog: dialog.accept())
    await page.get_by_role("button", name="Approve add as it is now").click()
    await expect(page.get_by_role("status").filter(has_text="Approved add")).to_be_visible()
    await expect(page.get_by_role("region", name="Changes of add table")).to_have_count(0)
    await expect(page.get_by_role("region", name="Changes of grab table")).to_be_visible()
    assert served.gateway.catalog.tools["add"].definition.ai_description == POISONED
    locked = json.loads((served.gateway.settings.definitions / "tools.lock.json").read_text(encoding="utf-8"))
    assert locked["tools"]["add"]["content"]["ai_description"] == POISONED and "grab" not in locked["tools"]


def test_an_approval_of_what_the_admin_did_not_see_is_refused(served: RunningServer):
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    held = httpx.get(f"{served.url}/admin/api/held", headers=admin, timeout=30).json()["held"]
    assert [h["tool"] for h in held] == ["add", "grab"]
    stale = httpx.post(f"{served.url}/admin/api/held/add", json={"digest": "sha256:what-i-saw-yesterday"},
                       headers=admin, timeout=30)
    assert stale.status_code == 409 and "not held as you saw it" in stale.text
    form = httpx.post(f"{served.url}/admin/api/held/add", data={"digest": held[0]["digest"]}, headers=admin,
                      timeout=30)
    assert form.status_code == 415
    assert httpx.get(f"{served.url}/tools/add", headers=admin, timeout=30).json()["ai_description"] == TRUSTED
