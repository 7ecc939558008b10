"""MCP content blocks in a result: text, images, audio and resources, kept as the tool sent them.

A tool bound to an upstream MCP server answers with content blocks (``gateway.bindings.mcp``), and a Python tool
may return them (an ``mcp_types`` content block, or a list of them). ``invoke`` keeps them on the result
(``ToolResult.content``): MCP clients of the gateway get them as they were sent, REST gives them as ``content``,
and the chat loop gives each provider what it takes. The text an LLM reads is the blocks' own text, with one line
for each block that is no text (``line``); a structured result never stands in for it.

Blocks are JSON objects in MCP's spelling (``mimeType``), as on the wire. ``max_result_chars`` bounds them all
together (``bounded``): text by its characters, an image, audio or binary resource by its base64 characters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .truncation import truncate

Block = dict[str, Any]
KINDS = frozenset({"text", "image", "audio", "resource", "resource_link"})
BINARY_KEYS = frozenset({"data", "blob"})  # base64: no text in them to redact, and rewriting them corrupts them


@dataclass(frozen=True)
class Content:
    """What a tool answered as content blocks; ``value`` its structured result, None when that is the text."""

    blocks: tuple[Block, ...]
    value: Any = None


def returned_blocks(value: Any) -> Content | None:
    """A Python tool's ``mcp_types`` content block, or non-empty list of them, as ``Content``; None for any other
    value (checked by the class's module: ``mcp_types`` is not imported for it)."""
    items = value if isinstance(value, list) and value else (value,)
    if not type(items[0]).__module__.startswith("mcp_types"):  # the common case, a list of JSON values, at once
        return None
    if not all(type(item).__module__.startswith("mcp_types") and getattr(item, "type", None) in KINDS
               for item in items):
        return None
    return Content(tuple(item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items))


def text_of(blocks: tuple[Block, ...] | list[Block]) -> str:
    """The text an LLM reads of the blocks: each block's line, one per line."""
    return "\n".join(filter(None, (line(block) for block in blocks)))


def line(block: Block) -> str:
    """One block as text an LLM can read: its text, or what it is (its bytes are no text for an LLM)."""
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType')}, {_bytes(block.get('data', '')):,} bytes]"
    if kind == "resource_link":
        return f"[resource {block.get('name')}: {block.get('uri')}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return resource["text"]
        return f"[resource {resource.get('uri')}: {resource.get('mimeType') or 'binary'}, " \
               f"{_bytes(resource.get('blob', '')):,} bytes]"
    return f"[{kind} content]"


def _bytes(base64: str) -> int:
    return len(base64) * 3 // 4 - base64[-2:].count("=")


def served(text: str, blocks: tuple[Block, ...] | None) -> list[Block]:
    """The blocks to send for a result: the tool's own; when a filter rewrote the text (it no longer reads as the
    blocks do), that text as one block, then the tool's blocks that are no text; a result without blocks, its
    text as one block."""
    if blocks is None:
        return [{"type": "text", "text": text}]
    if text_of(blocks) == text:
        return list(blocks)
    return [{"type": "text", "text": text}, *(block for block in blocks if block.get("type") != "text")]


def rewritten(blocks: tuple[Block, ...], change: Callable[[Any], Any]) -> tuple[Block, ...]:
    """The blocks with ``change`` (a redaction of a JSON value) applied to all in them but their base64 data."""
    return tuple(_rewritten(block, change) for block in blocks)


def _rewritten(block: Block, change: Callable[[Any], Any]) -> Block:
    return {key: value if key in BINARY_KEYS else _rewritten(value, change) if key == "resource" and
            isinstance(value, dict) else change(value) for key, value in block.items()}


def bounded(blocks: tuple[Block, ...], max_chars: int) -> tuple[tuple[Block, ...], bool]:
    """The blocks within ``max_chars`` characters together, and whether any was cut: text past the budget is cut
    with the truncation mark; an image, audio or binary resource that does not fit whole is left out, a line
    saying so in its place (part of one would be no image)."""
    left = max_chars
    kept: list[Block] = []
    cut = False
    for block in blocks:
        resource = block.get("resource") if block.get("type") == "resource" else None
        body = block if resource is None else resource
        key = next((name for name in ("text", "data", "blob") if isinstance(body.get(name), str)), None)
        size = len(body[key]) if key is not None else len(line(block))
        if size <= left:
            kept.append(block)
            left -= size
            continue
        cut = True
        if key == "text":
            shortened = {**body, "text": truncate(body["text"], left)}
            kept.append(shortened if resource is None else {**block, "resource": shortened})
        else:
            kept.append({"type": "text", "text": f"{line(block)[:-1]}, left out: over max_result_chars]"})
        left = 0
    return tuple(kept), cut
