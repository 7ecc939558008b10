"""The catalog page lists the calls waiting for a person's approval — the tool, the caller, the arguments, the
reason — and an admin approves or denies each with its button: the approved call then runs once when it is made
again, the denied one is told so; the function never ran before."""

from __future__ import annotations

import shutil
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
AGENT = "console-agent-key-for-tests"
GUARDED = """\
tools:
  - id: send_invoice
    name: Send an invoice
    user_description: Sends an invoice to a customer.
    ai_description: Sends an invoice.
    binding: {python: "guarded:send"}
    approval: {approvers: [admins], reason: it reaches a customer}
"""
PYTHON = """\
import os


def send(customer: str) -> str:
    with open(os.environ["GUARDED_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(customer + "\\n")
    return f"sent to {customer}"
"""


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GUARDED_RUNS", str(tmp_path / "runs.txt"))
    definitions = tmp_path / "tools"
    shutil.copytree(TOOLS, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    (definitions / "guarded.yaml").write_text(GUARDED, encoding="utf-8")
    (definitions / "python").mkdir(exist_ok=True)
    (definitions / "python" / "guarded.py").write_text(PYTHON, encoding="utf-8")
    keys = (ApiKey(name="admin", sha256=hash_key(ADMIN_KEY), admin=True), ApiKey(name="agent", sha256=hash_key(AGENT)))
    with running(definitions, api_keys=keys) as served:
        yield served


def send(served: RunningServer, customer: str) -> httpx.Response:
    return httpx.post(f"{served.url}/tools/send_invoice/call", json={"customer": customer},
                      headers={"Authorization": f"Bearer {AGENT}"}, timeout=30)


@in_browser
async def test_waiting_calls_are_approved_or_denied_from_the_catalog_page(page: Page, served: RunningServer, tmp_path):
    assert send(served, "acme").status_code == 202
    assert send(served, "globex").status_code == 202
    await sign_in(page, served.url)
    section = page.get_by_role("region", name="Calls waiting for approval table")
    await expect(section.get_by_role("row")).to_have_count(3)  # the header and two calls
    await expect(section.get_by_role("row", name="acme")).to_contain_text("it reaches a customer")
    await expect(section.get_by_role("row", name="acme")).to_contain_text("agent")
    await check_page(page, "approvals")

    await section.get_by_role("row", name="acme").get_by_role("button", name="Approve send_invoice").click()
    await expect(page.get_by_role("status").filter(has_text="Approved send_invoice for agent")).to_be_visible()
    await section.get_by_role("row", name="globex").get_by_role("button", name="Deny send_invoice").click()
    await expect(page.get_by_role("status").filter(has_text="Denied send_invoice for agent")).to_be_visible()
    await expect(section.get_by_role("row")).to_have_count(1)
    runs = tmp_path / "runs.txt"
    assert not runs.exists()
    assert send(served, "acme").json()["result"] == "sent to acme"
    denied = send(served, "globex").json()
    assert denied["is_error"] and "was not approved" in denied["text"]
    assert runs.read_text(encoding="utf-8").splitlines() == ["acme"]
