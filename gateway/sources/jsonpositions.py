"""Line and column of a node of a JSON text, found from its path without composing the whole text.

Composing a 13 MB document (GitHub's OpenAPI document) into YAML nodes takes some 20 s; this walks the text
instead, skipping every sibling on the way with ``json``'s C decoder (``raw_decode``), so one lookup costs at most
one C-speed pass over the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..definitions.yamlsource import YamlDocument

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonDocument(YamlDocument):
    """A document read from JSON text: positions by walking the text (see the module)."""

    __slots__ = ()

    def position(self, path: Sequence[str | int], *, key: bool = False) -> tuple[int, int]:
        offset = _offset(self.text, path)
        line = self.text.count("\n", 0, offset) + 1
        return line, offset - (self.text.rfind("\n", 0, offset) + 1) + 1


def _offset(text: str, path: Sequence[str | int]) -> int:
    """Where the value at ``path`` starts (or its nearest parent's, when the path leads nowhere)."""
    at = _SPACE.match(text, 0).end()
    try:
        for step in path:
            found = _child(text, at, step)
            if found is None:
                break
            at = found
    except (ValueError, IndexError):  # the text is not the JSON the data came from: the parent's place will do
        pass
    return at


def _child(text: str, at: int, step: str | int) -> int | None:
    opening = text[at]
    if opening not in "{[":
        return None
    at = _SPACE.match(text, at + 1).end()
    index = 0
    while text[at] not in "}]":
        if opening == "{":
            name, at = _DECODER.raw_decode(text, at)
            at = _SPACE.match(text, at).end() + 1  # past ':'
            at = _SPACE.match(text, at).end()
            if name == str(step):
                return at
        elif index == step:
            return at
        _, at = _DECODER.raw_decode(text, at)
        at = _SPACE.match(text, at).end()
        if text[at] == ",":
            at = _SPACE.match(text, at + 1).end()
        index += 1
    return None
