"""The console signs in at a real identity provider (oidc-provider, tests/identity/idp): Chromium follows its pages
(the test server signs in the next user without a form), comes back to the console with a code, and the console
trades it for an access token at the token endpoint itself (CORS) — authorization code + PKCE as a public client.
Whether that account may use the console is the gateway's rules' call: carol (role gateway-admin) sees the
console, bob is told his account is not an admin's. Signing out forgets the token; an answer whose state this tab
did not make is never traded; an expired token brings the sign-in back. A pasted admin key still works."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from console_support import ADMIN_KEY, check_page, sign_in
from identity.idp import IdentityProvider, needs_idp, public_client, running_idp
from playwright.async_api import Page, Route, expect
from support import free_socket, running, serving

from gateway.identity.config import OAuthInvalid, parse
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.server.admin.signin import origin_of
from gateway.settings import ApiKey, Settings, hash_key

pytestmark = needs_idp
in_browser = pytest.mark.asyncio(loop_scope="session")

RULES = [{"scope": "tools", "toolsets": ["people"]},
         {"roles": ["gateway-admin"], "admin": True, "toolsets": "*"}]
SHORT_TTL_S = 2  # the tokens of the second gateway: long enough to sign in with, short enough to wait out


@dataclass
class Site:
    idp: IdentityProvider
    url: str  # a gateway whose console signs in at idp (and also takes an admin key)
    short: str  # another, whose tokens expire within SHORT_TTL_S and which allows no clock skew
    gateway: Gateway


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The gateways' ports are chosen first: each is its own audience, and the console's redirect URI."""
    sockets = [free_socket(), free_socket()]
    url, short = (f"http://127.0.0.1:{sock.getsockname()[1]}" for sock in sockets)
    client = public_client("console", [f"{url}/admin/", f"{short}/admin/"])
    with ExitStack() as stack:
        idp = stack.enter_context(running_idp(tmp_path_factory.mktemp("idp") / "idp.log", clients=[client],
                                              resources={short: {"ttl": SHORT_TTL_S}}))
        oauth = {"issuer": idp.issuer, "rules": RULES, "required_scopes": ["tools"], "console": {"client_id": "console"}}
        defs = tmp_path_factory.mktemp("defs")
        gateway = Gateway(Settings(definitions=defs, reload=False, oauth=parse({**oauth, "audience": url}),
                                   api_keys=(ApiKey("admin", hash_key(ADMIN_KEY), admin=True),)))
        stack.enter_context(serving(create_app(gateway), lifespan="on", sock=sockets[0]))
        expiring = Gateway(Settings(definitions=defs, reload=False,
                                    oauth=parse({**oauth, "audience": short, "leeway_s": 0})))
        stack.enter_context(serving(create_app(expiring), lifespan="on", sock=sockets[1]))
        yield Site(idp, url, short, gateway)


def claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


async def stored(page: Page) -> dict[str, str]:
    return await page.evaluate("Object.fromEntries(Object.entries(sessionStorage))")


async def sign_in_as(page: Page, site: Site, user: str, url: str | None = None) -> None:
    """Open the console, and sign in at the identity provider as ``user``."""
    site.idp.set_next_user(user)
    await page.goto(f"{url or site.url}/admin/#/problems")
    await page.get_by_role("button", name=f"Sign in with {urlsplit(site.idp.issuer).netloc}").click()


def test_the_sign_in_options_are_public_and_absent_without_the_setting(site, console):
    """/admin/api/signin names the issuer's endpoints (from its discovery document), the console's client and
    scope, and the gateway as the resource, to anyone; the page's CSP lets it post to the token endpoint's origin and
    no other. Without ``oauth.console``: 404, and the page may connect to its own origin only."""
    answer = httpx.get(f"{site.url}/admin/api/signin")
    assert answer.status_code == 200, answer.text
    discovery = site.idp.discovery()
    assert answer.json() == {
        "issuer": site.idp.issuer, "authorization_endpoint": discovery["authorization_endpoint"],
        "token_endpoint": discovery["token_endpoint"], "client_id": "console", "scope": "tools", "resource": site.url,
        "authorization_response_iss_parameter_supported": True}
    assert httpx.get(f"{site.url}/admin/api/overview").status_code == 401  # the rest of the API is not public
    csp = httpx.get(f"{site.url}/admin/").headers["content-security-policy"]
    assert f"connect-src 'self' {site.idp.issuer};" in csp and "*" not in csp

    missing = httpx.get(f"{console.url}/admin/api/signin")
    assert missing.status_code == 404 and "oauth.console" in missing.json()["error"]
    assert "connect-src 'self';" in httpx.get(f"{console.url}/admin/").headers["content-security-policy"]


def test_an_issuer_that_cannot_be_read_is_said_and_opens_nothing(tmp_path):
    """An issuer that does not answer: 502 saying so, and the page's CSP stays its own origin only. Origins that
    could smuggle a directive into the CSP, or are not https off loopback, are never used."""
    nobody = free_socket()  # bound, never listening: connections are refused
    oauth = parse({"issuer": f"http://127.0.0.1:{nobody.getsockname()[1]}", "audience": "http://127.0.0.1:1",
                   "console": {"client_id": "console"}, "jwks": {"timeout_s": 2}})
    with running(tmp_path, oauth=oauth) as server:
        answer = httpx.get(f"{server.url}/admin/api/signin")
        assert answer.status_code == 502 and "no discovery document" in answer.json()["error"]
        assert "connect-src 'self';" in httpx.get(f"{server.url}/admin/").headers["content-security-policy"]
    nobody.close()
    assert origin_of("https://Login.Example.com:8443/token") == "https://login.example.com:8443"
    for url in ("https://idp.example.com;script-src */token", "https://a b.example/token", "http://idp.example.com/t",
                "https://user@idp.example.com/token", "javascript:alert(1)", "https://[::1/token"):
        assert origin_of(url) is None, url


def test_the_console_setting_is_checked():
    base = {"issuer": "https://idp.example.com", "audience": "https://gw.example.com", "required_scopes": ["mcp"]}
    assert parse({**base, "console": {"client_id": "c"}}).console.scopes == ("mcp",)  # the required ones by default
    assert parse({**base, "console": {"client_id": "c", "scopes": ["mcp", "openid"]}}).console.scopes == ("mcp", "openid")
    for console, where in (({"client_id": ""}, "oauth.console.client_id"), ({"client": "c"}, "oauth.console"),
                           ({"client_id": "c", "scopes": ["openid"]}, r"required scope\(s\) mcp"),
                           ({"client_id": "c", "scopes": ["mcp", "a b"]}, "oauth.console.scopes")):
        with pytest.raises(OAuthInvalid, match=where):
            parse({**base, "console": console})


@in_browser
async def test_an_admin_signs_in_at_the_identity_provider_and_out(site, page):
    """carol (role gateway-admin) signs in through the identity provider's pages and lands on the page she opened,
    signed in as herself; the token is kept in sessionStorage alone, never in the address bar; signing out forgets
    it."""
    await page.goto(f"{site.url}/admin/")
    button = page.get_by_role("button", name=f"Sign in with {urlsplit(site.idp.issuer).netloc}")
    await expect(button).to_be_visible()
    await expect(page.get_by_label("Admin key")).to_be_visible()  # pasting a key stays
    await check_page(page, "sign-in-identity-provider")

    await sign_in_as(page, site, "carol")
    await expect(page.get_by_role("heading", name="Problems & reloads")).to_be_visible()
    await expect(page.locator("#who-text")).to_have_text("Signed in as carol")
    assert "code=" not in page.url and "state=" not in page.url
    held = await stored(page)
    token = held["tool-gateway.admin-key"]
    assert claims(token)["sub"] == "carol" and claims(token)["aud"] == site.url and claims(token)["client_id"] == "console"
    assert set(held) == {"tool-gateway.admin-key", "tool-gateway.admin-issuer"}  # the sign-in's state is gone
    assert await page.evaluate("localStorage.length") == 0 and await page.evaluate("document.cookie") == ""

    await page.get_by_role("link", name="Catalog").click()  # the token works on every page, as a key does
    await expect(page.get_by_role("heading", name="Catalog")).to_be_visible()
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("status")).to_contain_text("access token was removed")
    assert await page.evaluate("sessionStorage.length") == 0


@in_browser
async def test_an_account_that_is_not_an_admin_is_told_so(site, page):
    """bob has a valid token, but no rule makes him an admin: the console says so instead of a broken page, and
    forgets his token; signing in again asks the identity provider for a fresh sign-in, so carol can."""
    await sign_in_as(page, site, "bob")
    await expect(page.get_by_role("alert")).to_contain_text("Your account is not an admin of this gateway")
    await expect(page.locator("#nav")).to_be_hidden()
    assert await page.evaluate("sessionStorage.length") == 0
    await check_page(page, "sign-in-not-admin")

    site.idp.set_next_user("carol")  # bob's session at the identity provider would sign bob in again without it
    await page.get_by_role("button", name=f"Sign in with {urlsplit(site.idp.issuer).netloc}").click()
    await expect(page.locator("#who-text")).to_have_text("Signed in as carol")


@in_browser
async def test_an_answer_with_another_state_is_not_used(site, page):
    """The identity provider's answer comes back with a state this tab did not make (a forged or swapped
    answer): the console refuses it, never trades its code, and holds nothing."""
    async def tamper(route: Route) -> None:
        # Signs in at the identity provider as the tab asked (its PKCE challenge), then hands the tab a real code
        # under another state. (Playwright routes only the first request of a redirect chain: this one.)
        answer = await asyncio.to_thread(site.idp.sign_in, route.request.url)
        query = urlencode({**answer, "state": "not-the-state-this-tab-made"})
        await route.fulfill(status=302, headers={"Location": f"{site.url}/admin/?{query}"})

    await page.route(f"{site.idp.issuer}/auth?*", tamper)
    trades = site.idp.stats()["token_requests"].get("authorization_code", 0)
    await sign_in_as(page, site, "carol")
    await expect(page.get_by_role("alert")).to_contain_text("its state does not match")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0
    assert "code=" not in page.url
    assert site.idp.stats()["token_requests"].get("authorization_code", 0) == trades


@in_browser
async def test_an_expired_token_brings_the_sign_in_back(site, page):
    """Once the token expires the gateway answers 401 (here to the Problems page, which reads the gateway every
    2 s): the console forgets it and asks to sign in again."""
    await sign_in_as(page, site, "carol", url=site.short)
    await expect(page.get_by_role("alert")).to_contain_text("Your sign-in has ended: The access token has expired.",
                                                            timeout=30_000)
    assert await page.evaluate("sessionStorage.length") == 0
    await expect(page.get_by_role("button", name=f"Sign in with {urlsplit(site.idp.issuer).netloc}")).to_be_visible()


@in_browser
async def test_an_admin_key_still_opens_the_console(site, page):
    await sign_in(page, site.url)
    await expect(page.locator("#who-text")).to_have_text("Signed in with an admin key")
