"""Costly templates in HTTP-bound tools, through a running gateway: refused at once, or rendered off the event
loop so that other requests (``/healthz``) keep being answered and the tool's timeout holds (issue 10, F4/F9)."""

from __future__ import annotations

import asyncio

import httpx
import yaml
from http_tools import http_tool
from support import serving

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.invoke import invoke
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

POWER = "{{ (args.p|int) ** (args.v|int) }}"
NESTED_LOOPS = "{% for a in args.l %}{% for b in args.l %}{% endfor %}{% endfor %}done"


def _serve(tmp_path, *tools):
    root = tmp_path / "defs"
    root.mkdir()
    (root / "tools.yaml").write_text(yaml.safe_dump({"tools": list(tools)}), encoding="utf-8")
    return serving(create_app(Gateway(Settings(definitions=root, reload=False))), lifespan="on")


async def test_costly_constant_compiles_at_once(tmp_path, upstream):
    """`text: "{{ 'x' * 10**9 }}"` builds (nothing computed while compiling) and fails each call with a message."""
    root = tmp_path / "defs"
    root.mkdir()
    tool = http_tool({"url": upstream.at("/echo/x"), "method": "POST", "text": "{{ 'x' * 10**9 }}"})
    (root / "tools.yaml").write_text(yaml.safe_dump({"tools": [tool]}), encoding="utf-8")
    settings = Settings(definitions=root)
    catalog = build_catalog(load_definitions(root), settings)
    result = await invoke(catalog, "t", {})
    assert result.is_error and "TemplateTooCostly: repeating a str 1000000000 times would make a value of" in result.text


async def test_huge_power_is_an_error_result_and_the_server_keeps_answering(tmp_path, upstream):
    """`(p|int) ** (v|int)` with p=9, v=30,000,000 is refused before it is computed: an error result, and
    /healthz answers meanwhile."""
    tool = http_tool({"url": upstream.at("/echo/x"), "method": "POST", "text": POWER},
                     {"p": {"type": "integer"}, "v": {"type": "integer"}}, timeout_s=5)
    with _serve(tmp_path, tool) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            call = asyncio.create_task(client.post("/tools/t/call", json={"p": 9, "v": 30_000_000}))
            health = await client.get("/healthz")
            body = (await call).json()
    assert health.status_code == 200
    assert body["is_error"] is True
    assert "the template for the text body failed: TemplateTooCostly" in body["error"]
    assert "9 ** 30000000 would make an integer of" in body["error"]


async def test_slow_render_does_not_block_other_requests(tmp_path, upstream):
    """While a template loops for as long as it may, /healthz is answered before the call ends, and the call
    ends as an error result naming the template's time budget."""
    tool = http_tool({"url": upstream.at("/echo/x"), "method": "POST", "text": NESTED_LOOPS},
                     {"l": {"type": "array"}}, timeout_s=5)
    with _serve(tmp_path, tool) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            call = asyncio.create_task(client.post("/tools/t/call", json={"l": list(range(100_000))}))
            await asyncio.sleep(0.3)  # the call is rendering (an ordering aid, not an assertion on time)
            health = await client.get("/healthz")
            answered_first = not call.done()
            body = (await call).json()
    assert health.status_code == 200 and answered_first
    assert body["is_error"] is True and "ran longer than 1 s" in body["error"]


async def test_tool_timeout_holds_during_a_slow_render(tmp_path, upstream):
    """A tool whose timeout is shorter than the render budget times out as a tool: its timeout holds."""
    tool = http_tool({"url": upstream.at("/echo/x"), "method": "POST", "text": NESTED_LOOPS},
                     {"l": {"type": "array"}}, timeout_s=0.3)
    with _serve(tmp_path, tool) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            body = (await client.post("/tools/t/call", json={"l": list(range(100_000))})).json()
    assert body["is_error"] is True
    assert "did not finish within 0.3 s" in body["error"] or "ran longer than 0.3 s" in body["error"]
