"""Prompts and resources as declared in YAML (``prompts:`` and ``resources:`` beside ``tools:``).

Read here as written, once the schema check let an entry through whole; what they need compiled or read
(templates, files, an HTTP binding) is made when the catalog is built (``gateway.catalog.prompts``, ``gateway.catalog.resources``),
where each problem is located in its entry as a tool's are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import Problem
from .yamlsource import YamlDocument


@dataclass(frozen=True, eq=False)
class Declared:
    """One entry of ``prompts:`` or ``resources:``: its key (a prompt's id, a resource's uri) and its mapping."""

    key: str
    raw: Mapping[str, Any]
    document: YamlDocument | None = field(default=None, repr=False)
    index: int = 0
    section: str = "prompts"

    @property
    def file(self) -> str:
        return self.document.file if self.document else "<memory>"

    @property
    def toolsets(self) -> tuple[str, ...]:
        toolsets = self.raw.get("toolsets")
        return tuple(toolsets) if isinstance(toolsets, list) else ()

    @property
    def path(self) -> tuple[str | int, ...]:
        return (self.section, self.index)

    def problem(self, path: Iterable[str | int], message: str, *, key: bool = False,
                severity: str = "error") -> Problem:
        if self.document is None:
            return Problem(self.file, 1, 1, f"{self.key}: {message}", severity)
        return self.document.problem([*self.path, *path], message, key=key, severity=severity)

    def at(self) -> str:
        """Where it is declared, as ``file:line:col``."""
        line, column = self.document.position([*self.path]) if self.document else (1, 1)
        return f"{self.file}:{line}:{column}"


# The key naming each kind of entry, unique across files.
KEYS = {"prompts": "id", "resources": "uri"}


def declared(document: YamlDocument, section: str, misshapen: set[int]) -> tuple[Declared, ...]:
    """The entries of ``section`` that the schema check let through whole (it reported the others)."""
    raw_entries = document.data.get(section) if isinstance(document.data, dict) else None
    key = KEYS[section]
    return tuple(Declared(raw[key], raw, document, index, section)
                 for index, raw in enumerate(raw_entries if isinstance(raw_entries, list) else [])
                 if isinstance(raw, dict) and isinstance(raw.get(key), str) and index not in misshapen)


def repeated_keys(entries: Iterable[Declared]) -> list[Problem]:
    """One problem per prompt id or resource uri declared twice, at the repeat; the first declaration is kept."""
    first: dict[tuple[str, str], Declared] = {}
    problems = []
    for entry in entries:
        earlier = first.setdefault((entry.section, entry.key), entry)
        if earlier is not entry:
            what = "prompt id" if entry.section == "prompts" else "resource uri"
            problems.append(entry.problem([KEYS[entry.section]], f"duplicate {what} '{entry.key}' "
                                                                  f"(first declared at {earlier.at()})"))
    return problems
