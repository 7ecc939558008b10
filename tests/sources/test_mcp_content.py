"""An upstream MCP tool's content blocks pass through unchanged: every kind of block (text, image, audio, embedded
text and binary resources, a resource link, several blocks) reaches REST and our /mcp — fast path and SDK — as the
upstream sent it, compared block by block with a direct call; a typed result reads as the upstream's text beside its
structuredContent; secrets are redacted from text blocks and text resources; max_result_chars bounds the blocks with
their base64 data. A Python tool returning ``mcp_types`` blocks is served the same way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp_upstreams import FILE_TEXT, GALLERY_TEXT, Upstream, gateway_serving, http_source, sources_yaml, upstream

from gateway.server.mcp import fast as mcp_fast
from gateway.server.rest import fast as rest_fast

TOKEN = "content-token-7c1e"


@pytest.fixture(scope="module")
def content_server() -> Iterator[Upstream]:
    with upstream("content_http.py") as running:
        yield running


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("UPSTREAM_TOKEN", TOKEN)


@pytest.fixture
def defs(tmp_path: Path, content_server: Upstream) -> Path:
    root = tmp_path / "defs"
    root.mkdir()
    (root / "content.yaml").write_text(sources_yaml(http_source(
        "content", content_server.url, ", headers: {Authorization: 'Bearer {{ secrets.UPSTREAM_TOKEN }}'}")))
    return root


def dumped(blocks: list[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


async def direct(server: Upstream, tool: str, arguments: dict[str, Any]) -> Any:
    async with Client(server.url) as client:
        return await client.call_tool(tool, arguments)


def rest_call(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/tools/{tool}/call", json=arguments, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


async def test_every_kind_of_block_reaches_rest_and_mcp_as_the_upstream_sent_it(defs, content_server, monkeypatch):
    """gallery's seven blocks come through REST (``content``) and /mcp (fast path and SDK) one by one as a direct
    call to the upstream gets them; the text an LLM reads is their text, one honest line per block that is none."""
    arguments = {"note": "sunny"}
    sent = dumped((await direct(content_server, "gallery", arguments)).content)
    assert [block["type"] for block in sent] == ["text", "image", "audio", "resource", "resource", "resource_link",
                                                 "text"]
    with gateway_serving(defs) as served:
        for fast in (True, False):
            monkeypatch.setattr(rest_fast, "ENABLED", fast)
            monkeypatch.setattr(mcp_fast, "ENABLED", fast)
            answer = rest_call(served.url, "gallery", arguments)
            assert answer["content"] == sent
            assert answer["text"] == answer["result"] == GALLERY_TEXT
            async with Client(f"{served.url}/mcp") as client:
                result = await client.call_tool("gallery", arguments)
            assert dumped(result.content) == sent and not result.is_error and result.structured_content is None


async def test_a_typed_result_reads_as_the_upstreams_text_beside_its_structured_content(defs, content_server,
                                                                                      monkeypatch):
    """read_file answers as server-filesystem does: the text a model reads is the file's text, not a JSON dump of
    {"content": ...}, which is the structured result beside it (REST ``result``, MCP ``structuredContent``); weigh,
    with no content block at all, reads as its structured result's JSON."""
    sent = await direct(content_server, "read_file", {})
    with gateway_serving(defs) as served:
        for fast in (True, False):
            monkeypatch.setattr(rest_fast, "ENABLED", fast)
            monkeypatch.setattr(mcp_fast, "ENABLED", fast)
            answer = rest_call(served.url, "read_file", {})
            assert answer["text"] == FILE_TEXT and answer["result"] == {"content": FILE_TEXT}
            assert answer["content"] == dumped(sent.content)
            async with Client(f"{served.url}/mcp") as client:
                result = await client.call_tool("read_file", {})
            assert dumped(result.content) == dumped(sent.content) == [{"type": "text", "text": FILE_TEXT}]
            assert result.structured_content == sent.structured_content == {"content": FILE_TEXT}
            # With no text at all, the structured result's JSON is all there is to read.
            assert rest_call(served.url, "weigh", {})["text"] == '{"grams": 5}'


async def test_secrets_are_redacted_from_text_blocks_text_resources_and_errors(defs):
    """The connection's secret echoed back in a text block, an embedded text resource and an isError text shows as
    its name; the base64 data beside it is untouched."""
    with gateway_serving(defs) as served:
        answer = rest_call(served.url, "gallery", {"note": TOKEN})
        refused = rest_call(served.url, "refuse", {"note": TOKEN})
        async with Client(f"{served.url}/mcp") as client:
            result = await client.call_tool("gallery", {"note": TOKEN})
    for shown in (answer, refused, dumped(result.content)):
        assert TOKEN not in str(shown) and "UPSTREAM_TOKEN" in str(shown)
    assert answer["content"][0]["text"].startswith("caption: ") and answer["content"][3]["resource"]["text"]
    assert answer["content"][1] == dumped(result.content)[1] and answer["content"][1]["data"].startswith("iVBOR")
    assert refused["is_error"]


async def test_the_redact_filter_cleans_text_blocks_and_text_resources_and_keeps_the_image(defs):
    """A settings-wide redact filter takes its literal out of every text block and the embedded text resource that
    MCP and REST serve, not only out of ``text``; the blocks stay the upstream's (the image among them)."""
    filters = ({"use": "redact", "with": {"literals": ["sunny"]}},)
    with gateway_serving(defs, filters=filters) as served:
        answer = rest_call(served.url, "gallery", {"note": "sunny"})
        async with Client(f"{served.url}/mcp") as client:
            result = await client.call_tool("gallery", {"note": "sunny"})
    assert answer["content"] == dumped(result.content) and "sunny" not in str(answer)
    assert answer["text"] == GALLERY_TEXT.replace("sunny", "[redacted]")
    assert [block["type"] for block in answer["content"]] == ["text", "image", "audio", "resource", "resource",
                                                              "resource_link", "text"]
    assert answer["content"][3]["resource"]["text"] == "notes: [redacted]"


async def test_max_result_chars_bounds_the_blocks_base64_data_counted(defs):
    """With max_result_chars 100, an image whose base64 data (1,344 characters) does not fit is left out, a line
    saying so in its place; text is cut with the truncation mark; nothing sent exceeds the cap but the marks."""
    with gateway_serving(defs, max_result_chars=100) as served:
        answer = rest_call(served.url, "gallery", {"note": "x" * 150, "pixels": 1000})
        async with Client(f"{served.url}/mcp") as client:
            result = await client.call_tool("gallery", {"note": "x" * 150, "pixels": 1000})
    assert answer["truncated"] is True and answer["content"] == dumped(result.content)
    blocks = answer["content"]
    assert all(block["type"] in ("text", "resource") for block in blocks)
    assert blocks[0]["text"].startswith("caption: " + "x" * 91 + "\n…[truncated: 59 more characters]")
    assert blocks[1] == {"type": "text", "text": "[image: image/png, 1,008 bytes, left out: over max_result_chars]"}
    assert not any("data" in block or "blob" in block.get("resource", {}) for block in blocks)


CHART = """
import base64

import mcp_types


def chart():
    png = base64.b64encode(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(8)).decode()
    return [mcp_types.TextContent(type="text", text="a chart"),
            mcp_types.ImageContent(type="image", data=png, mime_type="image/png")]
"""


async def test_a_python_tool_returning_mcp_content_blocks_is_served_as_an_upstream_tool_is(write_definitions):
    """A Python tool's list of mcp_types blocks is content, not a JSON value: REST gives the blocks and their text,
    MCP the same blocks."""
    root = write_definitions({"python/charts.py": CHART, "tools.yaml": """
        tools:
          - {id: chart, name: chart, user_description: u, ai_description: a, binding: {python: "charts:chart"}}
        """})
    with gateway_serving(root) as served:
        answer = rest_call(served.url, "chart", {})
        async with Client(f"{served.url}/mcp") as client:
            result = await client.call_tool("chart", {})
    assert answer["text"] == answer["result"] == "a chart\n[image: image/png, 16 bytes]"
    assert answer["content"] == dumped(result.content) == [
        {"type": "text", "text": "a chart"}, {"type": "image", "data": "iVBORw0KGgoAAAAAAAAAAA==", "mimeType": "image/png"}]
