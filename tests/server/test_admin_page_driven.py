"""A web page cannot drive the console (issue 23 item 1): with auth off — the default ``serve`` — a page on another
loopback port once made the gateway check a draft (which ran its MCP source's command), save files and reload,
with ``no-cors`` ``text/plain`` POSTs. Admin writes now need a JSON body and, with auth off, the console token
that only the gateway's own pages can read; admin routes answer no other origin."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from server_support import ADMIN_KEY, API_KEYS
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route
from support import CONSOLE, chromium, serving

ATTACK = """<!doctype html><meta charset="utf-8"><title>another page</title><script>
window.attack = async (gateway, draft) => {
  const simple = (path, body) => fetch(gateway + path, {method: "POST", mode: "no-cors",
                                                        headers: {"Content-Type": "text/plain"}, body});
  await simple("/admin/api/check", JSON.stringify({path: "math.yaml", text: draft}));
  await simple("/admin/api/files", JSON.stringify({path: "planted.yaml", template: "empty"}));
  await simple("/admin/reload", "");
  // With CORS: the token (to send it next), then a write as the console sends it.
  const token = await fetch(gateway + "/admin/api/token").then(r => r.json()).then(b => b.token, e => "refused: " + e);
  const json = await fetch(gateway + "/admin/api/files", {method: "POST", headers: {"Content-Type": "application/json",
                           "X-Gateway-Token": token}, body: JSON.stringify({path: "planted2.yaml", template: "empty"})})
    .then(r => r.status, e => "refused: " + e);
  return {token, json};
};
</script>"""


def draft_running(marker: Path) -> str:
    """A definitions file whose MCP source's command would create ``marker`` if it ever ran."""
    return ("sources:\n  - id: planted\n    mcp: {command: sh, args: ['-c', 'touch " + str(marker) + "'], "
            "connect_timeout_s: 5}\n")


@pytest.fixture
def served(start_server, examples_dir):
    return start_server(examples_dir)


async def test_a_page_on_another_loopback_port_cannot_make_the_console_write(served, examples_dir, tmp_path):
    """Chromium opens a page on another loopback port of this machine, which sends the console's writes as simple
    requests and tries to read the token with CORS: no command runs, no file is made, the catalog is unchanged."""
    marker = tmp_path / "ran"
    attacker = Starlette(routes=[Route("/", lambda request: HTMLResponse(ATTACK))])
    last_reload = served.gateway.last_reload
    with serving(attacker) as page_server:
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(page_server.url + "/")
            outcome = await page.evaluate("([gateway, draft]) => attack(gateway, draft)",
                                          [served.url, draft_running(marker)])
    assert not marker.exists()
    assert not (examples_dir / "planted.yaml").exists() and not (examples_dir / "planted2.yaml").exists()
    assert served.gateway.last_reload is last_reload  # no reload ran
    assert outcome["token"].startswith("refused: ") and str(outcome["json"]).startswith("refused: ")


def test_an_admin_write_needs_a_json_body_and_the_console_token(served, examples_dir):
    """Without a JSON content type a write is 415; without the token (or with another) 403, naming the header and
    where to get it; with both it runs. Reads need no token."""
    draft = {"path": "math.yaml", "text": (examples_dir / "math.yaml").read_text()}
    with httpx.Client(base_url=served.url, timeout=60) as http:
        token = http.get("/admin/api/token").json()
        plain = http.post("/admin/api/check", content=json.dumps(draft), headers={"Content-Type": "text/plain",
                                                                                    "X-Gateway-Token": token["token"]})
        untyped = http.post("/admin/api/check", content=json.dumps(draft), headers={"X-Gateway-Token": token["token"]})
        missing = http.post("/admin/api/check", json=draft)
        wrong = http.post("/admin/reload", headers={"X-Gateway-Token": "guessed"})
        bare_reload = http.post("/admin/reload")
        good = http.post("/admin/api/check", json=draft, headers={"X-Gateway-Token": token["token"]})
        reloaded = http.post("/admin/reload", headers={"X-Gateway-Token": token["token"]})
    assert token["header"] == "X-Gateway-Token" and len(token["token"]) >= 32
    assert plain.status_code == 415 and untyped.status_code == 415
    assert missing.status_code == wrong.status_code == bare_reload.status_code == 403
    assert "X-Gateway-Token" in missing.json()["error"] and "GET /admin/api/token" in missing.json()["error"]
    assert "not this process's" in wrong.json()["error"]
    assert good.json() == {"ok": True, "problems": []} and reloaded.status_code == 200


def test_admin_routes_answer_the_gateways_own_origin_and_no_other_loopback_page(served):
    """The loopback default of allowed_origins (auth off, list empty) serves tool surfaces to any local page, but
    admin routes answer only the gateway's own origin: another port's page gets 403, its preflight too."""
    own = served.url
    other = "http://127.0.0.1:1"
    with httpx.Client(base_url=served.url, timeout=30, auth=CONSOLE) as http:
        from_own = http.get("/admin/api/token", headers={"Origin": own})
        from_other = http.get("/admin/api/token", headers={"Origin": other})
        preflight = http.options("/admin/api/files", headers={
            "Origin": other, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-gateway-token"})
        tools_from_other = http.get("/tools", headers={"Origin": other})
    assert from_own.status_code == 200
    assert from_other.status_code == 403 and "admin routes" in from_other.json()["error"]
    assert preflight.status_code == 403
    assert tools_from_other.status_code == 200  # the tool surfaces keep the loopback default


def test_with_auth_on_the_admin_key_is_the_proof_and_a_plain_body_is_still_refused(start_server, examples_dir):
    """With API keys, Authorization (which no page sends without a preflight) carries the proof: no token needed;
    the JSON content type still is."""
    served = start_server(examples_dir, api_keys=API_KEYS)
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=served.url, timeout=60, headers=admin) as http:
        reloaded = http.post("/admin/reload")
        plain = http.post("/admin/api/check", content=b'{"path": "math.yaml", "text": ""}',
                          headers={"Content-Type": "text/plain"})
    assert reloaded.status_code == 200 and plain.status_code == 415
