"""Lone surrogates: code points U+D800–U+DFFF on their own, which JSON can spell (``"\\ud800"``) and Python
strings can hold, but which no UTF-8 encoder will write. One in a response body used to be a 500.

A request that holds one is refused (``find_lone`` says where); a result that holds one — from a Python tool,
or an upstream's JSON — has each replaced by U+FFFD (``scrub``), as any UTF-8 decoder would show it.
"""

from __future__ import annotations

import re
from typing import Any

LONE = re.compile("[\ud800-\udfff]")
"""Any surrogate code point in a ``str``. Text decoded from JSON holds only lone ones: the decoder joins an
escaped pair (``"\\ud83d\\ude00"``) into the one character it spells."""


def replace_lone(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; a pair of surrogate code points becomes the one
    character it spells."""
    if text.isascii() or LONE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub(value: Any) -> Any:
    """A JSON value with ``replace_lone`` applied to every string in it, keys included."""
    if isinstance(value, str):
        return replace_lone(value)
    if isinstance(value, dict):
        return {replace_lone(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def find_lone(value: Any) -> list[str | int] | None:
    """The path to a string (key or value) in a JSON value that holds a lone surrogate; None if none does.

    Iterative, so that a value as deeply nested as the JSON parser allows is walked without recursion."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and LONE.search(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if not key.isascii() and LONE.search(key):
                    return [*path, key]
                stack.append((child, [*path, key]))
        elif isinstance(item, list):
            stack.extend((child, [*path, index]) for index, child in enumerate(item))
    return None
