"""An upstream MCP tool's content blocks in the chat loop: each provider is sent what it takes — Anthropic the image
as an image block of its tool_result, OpenAI the text with one line per block that is no text — and a typed
result reads as the upstream's text, never a JSON dump of its structured form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import Reply, anthropic_provider, openai_provider
from sources.mcp_upstreams import FILE_TEXT, GALLERY_TEXT, http_source, sources_yaml, upstream

CALLS = [("call_g", "gallery", {"note": "sunny"}), ("call_f", "read_file", {})]


@pytest.fixture(scope="module")
def content_defs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("content-defs")
    with upstream("content_http.py") as running:
        (root / "content.yaml").write_text(sources_yaml(http_source("content", running.url)))
        yield root


def test_openai_is_sent_the_upstreams_text_with_a_line_per_other_block(endpoint, llm, content_defs):
    """A tool message takes text only: the blocks' text, a line for each other block, nothing of the rest."""
    ep = endpoint(content_defs, providers={"default": openai_provider(llm)})
    llm.answer(Reply(tool_calls=CALLS), Reply(content="done"))
    assert ep.post({"messages": [{"role": "user", "content": "look"}]}).status_code == 200
    sent = {m["tool_call_id"]: m for m in llm.requests[1].body["messages"] if m["role"] == "tool"}
    assert sent["call_g"] == {"role": "tool", "tool_call_id": "call_g", "content": GALLERY_TEXT}
    assert sent["call_f"]["content"] == FILE_TEXT


def test_anthropic_is_sent_the_image_as_an_image_block_of_its_tool_result(endpoint, llm, content_defs):
    """A tool_result takes image blocks: the image goes as one (base64), every other block as its line of text."""
    ep = endpoint(content_defs, providers={"claude": anthropic_provider(llm)})
    llm.answer(Reply(tool_calls=CALLS), Reply(content="done"))
    assert ep.post({"messages": [{"role": "user", "content": "look"}]}).status_code == 200
    gallery, read_file = llm.requests[1].body["messages"][2]["content"]
    image = gallery["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert image["source"]["type"] == "base64" and image["source"]["data"].startswith("iVBOR")
    assert [part["text"] for part in gallery["content"] if part["type"] == "text"] == [
        line for line in GALLERY_TEXT.split("\n") if not line.startswith("[image")]
    assert read_file["content"] == FILE_TEXT
