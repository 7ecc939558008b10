"""What a browser page sends back on ``/client/bridge``, fuzzed: junk frames, then any answer to a call.

A page is code on someone's machine: its frames are remote input. Whatever it sends before answering (text
that is not JSON, binary frames, answers to calls that do not exist) is ignored, and whatever it answers (any
JSON value, JSON text, text with lone surrogates, an error with any message) becomes the call's 200 result or
error result — never a 500 — while the session stays open for the next call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from fuzz_support import FuzzServer, fuzz, json_values
from hypothesis import example, given
from hypothesis import strategies as st
from websockets.asyncio.client import connect

CALLS = {"example-tool": {"exampleParam": "x"}, "task_form_read": {}, "task_form_fill": {"title": "t"}}
surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
junk = st.one_of(st.text(max_size=20), st.binary(max_size=20), json_values.map(json.dumps),
                 st.fixed_dictionaries({"type": st.sampled_from(["result", "error"]), "id": json_values,
                                        "value": json_values}).map(json.dumps))
answers = st.one_of(
    st.tuples(st.just("result"), json_values | json_values.map(json.dumps) | surrogates).map(
        lambda kind_value: {"type": kind_value[0], "value": kind_value[1]}),
    json_values.map(lambda message: {"type": "error", "message": message}))


async def page_answers(url: str, tool_id: str, frames: list[str | bytes], answer: dict[str, Any]) -> list[dict]:
    """Open a session, make one call through it per answer kind: the fuzzed one, then a plain one."""
    outcomes = []
    async with connect(url.replace("http", "ws", 1) + "/client/bridge") as page, \
            httpx.AsyncClient(base_url=url, timeout=30) as http:
        session = json.loads(await page.recv())["session"]
        for reply in (answer, {"type": "result", "value": {"ok": True}}):
            call = asyncio.create_task(http.post(f"/tools/{tool_id}/call", json=CALLS[tool_id],
                                                 headers={"X-Gateway-Session": session}))
            sent = json.loads(await page.recv())
            for frame in frames:
                await page.send(frame)
            await page.send(json.dumps({**reply, "id": sent["id"]}))  # lone surrogates leave as \\ud800 escapes
            response = await call
            assert response.status_code == 200, response.text
            outcomes.append(response.json())
    return outcomes


@fuzz(30)
@given(tool_id=st.sampled_from(sorted(CALLS)), frames=st.lists(junk, max_size=3), answer=answers)
@example(tool_id="example-tool", frames=["[" * 100_000], answer={"type": "result", "value": "ok"})  # too deep to parse
def test_any_page_answer_is_a_result_and_the_session_lives_on(fuzz_server: FuzzServer, tool_id: str,
                                                              frames: list[str | bytes], answer: dict[str, Any]
                                                              ) -> None:
    """Junk frames then any answer: a 200 result or error result, and the same session serves the next call."""
    fuzzed, plain = asyncio.run(page_answers(fuzz_server.url, tool_id, frames, answer))
    assert isinstance(fuzzed["is_error"], bool) and isinstance(fuzzed["text"], str), fuzzed
    if answer["type"] == "error":
        assert fuzzed["is_error"] and "failed in the browser" in fuzzed["error"], fuzzed
    assert plain["tool"] == tool_id and isinstance(plain["is_error"], bool), plain
