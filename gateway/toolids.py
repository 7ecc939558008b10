"""Where each tool id is declared, kept between the loads of one definitions directory, so that finding the ids
declared twice costs what changed rather than a walk of every tool.

The loader returns the very same ``FileDefinitions`` for a file whose path and bytes did not change: a load
updates the index by the files that came and went (by identity), then reports the repeats exactly as
``checks.duplicate_ids`` does over every tool in file order — the same problems, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import checks
from .errors import Problem

if TYPE_CHECKING:
    from .definitions import FileDefinitions
    from .tool_definition import ToolDefinition


class ToolIds:
    """Tool id -> its declarations, over the files of the latest load."""

    def __init__(self) -> None:
        # id(file) -> file; holding the files keeps their ids from being reused by other objects.
        self._files: dict[int, FileDefinitions] = {}
        self._declared: dict[str, list[tuple[int, ToolDefinition]]] = {}
        self._repeated: set[str] = set()

    def update(self, files: Sequence[FileDefinitions]) -> tuple[list[Problem], frozenset[str]]:
        """Take ``files`` (in load order) as the directory's files now; the problems of every repeated id (at
        each repeat, naming the first declaration) and the ids declared more than once."""
        now = {id(f): f for f in files}
        for key in self._files.keys() - now.keys():
            for tool in self._files[key].tools:
                declared = self._declared[tool.id]
                declared.remove((key, tool))
                if len(declared) < 2:
                    self._repeated.discard(tool.id)
                if not declared:
                    del self._declared[tool.id]
        for key in now.keys() - self._files.keys():
            for tool in now[key].tools:
                declared = self._declared.setdefault(tool.id, [])
                declared.append((key, tool))
                if len(declared) > 1:
                    self._repeated.add(tool.id)
        self._files = now
        if not self._repeated:
            return [], frozenset()
        order = {id(f): position for position, f in enumerate(files)}
        repeats = sorted((entry for tool_id in self._repeated for entry in self._declared[tool_id]),
                         key=lambda entry: (order[entry[0]], entry[1].index))
        return checks.duplicate_ids(tool for _, tool in repeats), frozenset(self._repeated)
