"""The text a model reads of a tool — its name, descriptions, and every ``title`` and ``description`` in its
schemas — must say what it shows.

**Hidden characters.** Characters that display as nothing, or that reorder what is displayed, let a description
carry instructions a person reviewing it never sees: Unicode tag characters (U+E0000–E007F: ASCII mirrored
invisibly, the "ASCII smuggling" of tool-poisoning reports), zero-width characters and joiners, the byte-order
mark, bidirectional embeddings, overrides and isolates (the "Trojan Source" reorderings), the invisible math
operators, and variation selectors 17–256 (U+E0100–E01EF, which carry bytes after any character). An admin's own
YAML holding one is refused at its place; an upstream's tool (MCP, OpenAPI) has them taken out, with a warning
naming the tool and where, since the admin did not write it and a refusal would let an upstream stop every reload.
Emoji's presentation selectors (U+FE0E, U+FE0F) are not hidden text and stay; a zero-width joiner is taken out even
inside an emoji sequence (the emoji then shows as its parts).

**Likely injected instructions.** ``SUSPICIOUS`` is a documented rule set of phrasings that address the model
rather than describe the tool ("ignore previous instructions", "do not tell the user", "<IMPORTANT>", reading
secrets such as ``~/.ssh`` or ``.env``): an upstream description matching one is served, with a warning naming the
rule, for an admin to read (``validate`` lists it; the console's problems page shows it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

# (first, last) code points of what displays as nothing or reorders the display.
HIDDEN_RANGES = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; left-to-right and right-to-left marks
    (0x202A, 0x202E),  # bidirectional embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidirectional isolates, deprecated format characters
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0D),  # variation selectors 1-14 (15 and 16 choose text or emoji presentation: kept)
    (0xFEFF, 0xFEFF),  # byte-order mark, zero-width no-break space
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF9, 0xFFFB),  # interlinear annotation characters
    (0x1D173, 0x1D17A),  # musical symbol format characters
    (0xE0000, 0xE007F),  # tag characters
    (0xE0100, 0xE01EF),  # variation selectors 17-256
)
_HIDDEN = re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in HIDDEN_RANGES) + "]")
SCHEMA_TEXT_KEYS = ("title", "description")
MAX_DEPTH = 64  # of a schema walked for its texts (schemas are bounded deeper than this by the build anyway)

# (rule, pattern): phrasings that speak to the model instead of describing the tool. Matched without case on
# descriptions of at most MAX_SCANNED characters; each pattern is linear (no nested repetition).
SUSPICIOUS = (
    ("ignore-instructions", (r"\b(ignore|disregard|forget)\s+(all\s+|any\s+)?(the\s+)?"
                             r"(previous|prior|above|earlier|other)\s+(instructions|prompts?|rules|messages)")),
    ("hide-from-user", (r"\b(do\s+not|don't|never)\s+(tell|inform|mention\s+(this\s+)?to|show|reveal\s+to|alert)"
                        r"\s+(the\s+)?user")),
    ("important-tag", r"<\s*(important|system|instructions?|secret)\s*>"),
    ("role-switch", r"\b(you\s+are\s+now|new\s+instructions\s*:|system\s+prompt\s*:)"),
    ("read-secrets", r"(~/\.ssh|id_rsa|\.aws/credentials|/etc/passwd|\.env\b|mcp\.json|private[\s_-]?key)"),
    ("other-tools", r"\b(before|instead\s+of|after)\s+(using|calling)\s+(any|every|all|the)\s+(other\s+)?tools?\b"),
)
_SUSPICIOUS = tuple((rule, re.compile(pattern, re.IGNORECASE)) for rule, pattern in SUSPICIOUS)
MAX_SCANNED = 65_536


def hidden(text: str) -> list[tuple[int, str]]:
    """Each hidden character of ``text``: (its offset, ``U+XXXX NAME``)."""
    return [(found.start(), _named(found.group())) for found in _HIDDEN.finditer(text)]


def strip_hidden(text: str) -> str:
    return _HIDDEN.sub("", text)


def texts(schema: Any, path: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(path, text) of every ``title`` and ``description`` string in a schema, at any depth (to ``MAX_DEPTH``)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key in SCHEMA_TEXT_KEYS and isinstance(value, str):
                yield (*path, key), value
            elif isinstance(value, (Mapping, list)):
                yield from texts(value, (*path, key), depth + 1)
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from texts(value, (*path, index), depth + 1)


def without_hidden(schema: Any) -> Any:
    """``schema`` with the hidden characters taken out of its titles and descriptions; the same object when it held
    none (a tool rebuilt from it is then the one built before)."""
    if not any(_HIDDEN.search(text) for _, text in texts(schema)):
        return schema
    return _stripped(schema, 0)


def _stripped(schema: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        return schema
    if isinstance(schema, Mapping):
        return {key: strip_hidden(value) if key in SCHEMA_TEXT_KEYS and isinstance(value, str)
                else _stripped(value, depth + 1) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_stripped(value, depth + 1) for value in schema]
    return schema


def suspicious(text: str) -> list[str]:
    """The ``SUSPICIOUS`` rules ``text`` matches."""
    scanned = text[:MAX_SCANNED]
    return [rule for rule, pattern in _SUSPICIOUS if pattern.search(scanned)]


def _named(character: str) -> str:
    return f"U+{ord(character):04X} {unicodedata.name(character, 'UNNAMED')}"
