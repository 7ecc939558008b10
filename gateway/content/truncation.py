"""How a text longer than its cap is cut: one mark, shared by the call path and the bindings below it."""

from __future__ import annotations

TRUNCATION_MARK = "\n…[truncated: {omitted} more characters]"


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters plus a mark saying how many were left out (unchanged if short)."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + TRUNCATION_MARK.format(omitted=len(text) - max_chars)
