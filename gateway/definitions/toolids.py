"""Where each tool id is declared, kept between the loads of one definitions directory, so that finding the ids
declared twice costs what changed rather than a walk of every tool.

The loader returns the very same ``FileDefinitions`` for a file whose path and bytes did not change: a load
updates the index by the files that came and went (by identity), then reports the repeats exactly as
``checks.duplicate_ids`` does over every tool in file order — the same problems, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..errors import Problem
from . import checks
from .model import ToolDefinition


class FileDefinitions(Protocol):
    """What is read of a loaded file (``gateway.definitions.parse.FileDefinitions``)."""

    @property
    def tools(self) -> tuple[ToolDefinition, ...]: ...


class ToolIds:
    """Tool id -> its declarations, over the files of the latest load."""

    def __init__(self) -> None:
        # The files of the latest load, in order; holding them keeps their ids from being reused by other objects.
        self._order: tuple[FileDefinitions, ...] = ()
        self._declared: dict[str, list[tuple[int, ToolDefinition]]] = {}
        self._repeated: set[str] = set()

    def update(self, files: Sequence[FileDefinitions]) -> tuple[list[Problem], frozenset[str]]:
        """Take ``files`` (in load order) as the directory's files now; the problems of every repeated id (at
        each repeat, naming the first declaration) and the ids declared more than once."""
        before = self._order
        if len(before) == len(files):  # the common edit: files replaced in place, found without a dict of all
            went = [(id(old), old) for old, new in zip(before, files) if old is not new]
            came = [(id(new), new) for old, new in zip(before, files) if old is not new]
        else:
            now = {id(f): f for f in files}
            was = {id(f): f for f in before}
            went = [(key, was[key]) for key in was.keys() - now.keys()]
            came = [(key, now[key]) for key in now.keys() - was.keys()]
        for key, file in went:
            for tool in file.tools:
                declared = self._declared[tool.id]
                declared.remove((key, tool))
                if len(declared) < 2:
                    self._repeated.discard(tool.id)
                if not declared:
                    del self._declared[tool.id]
        for key, file in came:
            for tool in file.tools:
                declared = self._declared.setdefault(tool.id, [])
                declared.append((key, tool))
                if len(declared) > 1:
                    self._repeated.add(tool.id)
        self._order = tuple(files)
        if not self._repeated:
            return [], frozenset()
        order = {id(f): position for position, f in enumerate(files)}
        repeats = sorted((entry for tool_id in self._repeated for entry in self._declared[tool_id]),
                         key=lambda entry: (order[entry[0]], entry[1].index))
        return checks.duplicate_ids(tool for _, tool in repeats), frozenset(self._repeated)
