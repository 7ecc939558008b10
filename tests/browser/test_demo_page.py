"""The demo page served by the gateway: a scripted chat turn fills its task form through the client tools; the
screenshot of the result is kept in artifacts/ (CI keeps it as a test artifact)."""

from __future__ import annotations

import pytest
from browser_site import ARTIFACTS
from fake_llm import Reply

pytestmark = pytest.mark.asyncio(loop_scope="session")

TASK = {"title": "Replace the broken pump", "customer": "ACME Water", "priority": "urgent",
        "due_date": "2026-12-04", "description": "Pump 3 in the north station leaks; replace it and test the line."}


async def test_chat_turn_fills_the_task_form(site, llm, open_page):
    """The model calls task_form_fill (run in the page) and get_time (run in the gateway); the form shows the values."""
    llm.answer(Reply(tool_calls=[("call_fill", "task_form_fill", TASK), ("call_time", "get_time", {})]),
               Reply(content="I filled in the task form: an urgent pump replacement for ACME Water, due on "
                             "4 December. Please review it and submit."))
    page = await open_page(site.gateway + "/client/demo")
    await page.wait_for_function("document.getElementById('session').textContent.length > 20")  # bridge is live

    await page.fill("#chat-input", "Create an urgent task for ACME Water: replace the leaking pump 3 by 4 December.")
    await page.click("#chat-send")
    await page.wait_for_selector(".message.assistant")

    values = {name: await page.input_value(f"[name={name}]") for name in TASK}
    assert values == TASK
    assert await page.locator("#task-form .filled-by-ai").count() == len(TASK)
    assert await page.locator("#activity li").all_inner_texts() == ["browser task_form_fill", "gateway get_time"]
    offered = sorted(tool["function"]["name"] for tool in llm.requests[0].body["tools"])
    assert offered == ["get_time", "task_form_fill", "task_form_read"]
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "demo-task-form.png"), full_page=True)
