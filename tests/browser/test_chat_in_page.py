"""The runtime's chat helper: a page on another origin holds a conversation through /v1/chat/completions, runs the
client tools it is handed and sends their results back, while the gateway runs the server tools (real Chromium,
scripted LLM)."""

from __future__ import annotations

import json
import math

import pytest
from fake_llm import Reply
from playwright.async_api import Page

pytestmark = pytest.mark.asyncio(loop_scope="session")

CHAT = """([question, tools]) => GatewayTools.chat([{role: "user", content: question}], {gateway: {tools: tools}})"""


async def test_turn_with_a_client_and_a_server_tool_completes_with_both_results(llm, app_page: Page):
    """The model calls example-tool (run by the page) and square_root (run by the gateway); both results reach it."""
    llm.answer(Reply(tool_calls=[("call_page", "example-tool", {"exampleParam": "form"}),
                                 ("call_server", "square_root", {"x": 475695037565})]),
               Reply(content="The page said 'form answered'; the root is 689706.49."))

    reply = await app_page.evaluate(CHAT, ["Run both tools.", ["example-tool", "square_root"]])

    assert reply["content"] == "The page said 'form answered'; the root is 689706.49."
    root = math.sqrt(475695037565)
    assert sorted((e["tool"], e["side"], e["is_error"], e["result"]) for e in reply["executions"]) == [
        ("example-tool", "client", False, "form answered"), ("square_root", "server", False, root)]
    assert len(llm.requests) == 2
    sent = [(m["tool_call_id"], m["content"]) for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert sent == [("call_page", "form answered"), ("call_server", json.dumps(root))]
    runs = await app_page.evaluate("window.runs")
    assert [(r["tool"], r["via"], r["input"]) for r in runs] == [("example-tool", "chat", '{"exampleParam": "form"}')]


async def test_client_tool_that_throws_reaches_the_model_as_an_error_result(llm, app_page: Page):
    """A handler that throws during a chat turn is sent to the model as that tool's error result, and the turn ends."""
    llm.answer(Reply(tool_calls=[("call_1", "page_throws", {"field": "due"})]),
               Reply(content="The form has no due field."))

    reply = await app_page.evaluate(CHAT, ["Set the due date.", ["page_throws"]])

    assert reply["content"] == "The form has no due field."
    [execution] = reply["executions"]
    assert (execution["tool"], execution["side"], execution["is_error"]) == ("page_throws", "client", True)
    [sent] = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert sent["content"] == "the form has no field due"


async def test_chat_error_from_the_gateway_rejects_with_its_message(llm, app_page: Page):
    """When the gateway answers an error (here an unknown model), the chat helper rejects with the gateway's message."""
    error = await app_page.evaluate("""() => GatewayTools.chat([{role: "user", content: "hi"}], {model: "nope"})
                                              .then(() => null, e => e.message)""")

    assert error.startswith("The gateway answered 404: ")
    assert llm.requests == []
