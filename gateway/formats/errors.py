"""The one way adapting a schema fails: the target cannot express it (or cannot hold it)."""

from __future__ import annotations

from collections.abc import Sequence


class Unadaptable(Exception):
    """A tool's schema cannot be offered in a format; ``path`` is where, inside the schema, and why is the message.

    It never escapes ``render``: the tool is left out of that format and the reason becomes a diagnostic.
    """

    def __init__(self, path: Sequence[str | int], reason: str):
        super().__init__(reason)
        self.path = tuple(path)
        self.reason = reason
