"""A tool as declared in YAML: where it runs (``Scope``) and what it says (``ToolDefinition``).

The vocabulary every later stage reads (checks, bindings, the catalog, the call path), kept apart from loading
(``gateway.definitions``) so that the checks the loader runs can name it without importing the loader.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .errors import Problem
from .yamlsource import YamlDocument


class Scope(str, Enum):
    SERVER = "server"  # runs in the gateway
    CLIENT = "client"  # runs in the user's browser only
    ALL = "all"  # either place

    @property
    def runs_on_server(self) -> bool:
        return self is not Scope.CLIENT

    @property
    def runs_in_browser(self) -> bool:
        return self is not Scope.SERVER


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    id: str
    name: str
    user_description: str
    ai_description: str
    scope: Scope
    binding: Mapping[str, Any]
    input_schema: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None
    tags: tuple[str, ...] = ()
    toolsets: tuple[str, ...] = ()
    timeout_s: float | None = None
    annotations: Mapping[str, bool] = field(default_factory=dict)
    return_direct: bool = False
    max_calls: int | None = None
    offer: Mapping[str, Any] | None = None
    # How the LLM learns the output schema (description | result | none); None: the settings' return_schema.
    return_schema: str | None = None
    # Invocation filters declared on the tool, as written ("module:function", {use, with}, or a built-in's name).
    filters: tuple[Any, ...] = ()
    # Whether the audit trail records the arguments themselves (``audit: {arguments: false}``: digest and size only).
    audit_arguments: bool = True
    # ``slo: {p95_ms, error_rate}`` as written: judged over the SLO window (gateway.observe).
    slo: Mapping[str, float] | None = None
    # ``examples: [{title, arguments, expect}]`` as written: console presets, ``tool-gateway test`` cases.
    examples: tuple[Mapping[str, Any], ...] = ()
    # Where it was declared: the document and the index in its `tools` list.
    document: YamlDocument | None = field(default=None, repr=False)
    index: int = 0

    @property
    def file(self) -> str:
        return self.document.file if self.document else "<memory>"

    def problem(self, path: Iterable[str | int], message: str, *, key: bool = False, severity: str = "error") -> Problem:
        """A problem located at ``path`` inside this tool's YAML node."""
        full = ["tools", self.index, *path]
        if self.document is None:
            return Problem(self.file, 1, 1, f"tool '{self.id}': {message}", severity)
        return self.document.problem(full, message, key=key, severity=severity)
