"""What a filter works with: ``FilterCall`` (the call it wraps), ``Filter`` (a resolved filter) and
``FilterProblem`` (a spec that cannot be used). Kept apart from ``gateway.filters.chains`` so that the built-in filters
and the call path can name them without importing resolution."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

    from ..context import CallContext
    from ..definitions.model import ToolDefinition


class Tool(Protocol):
    """What a filter may read of the catalog's tool (``gateway.catalog.snapshot.Tool``: the catalog's build imports
    this module, so this module names no catalog type)."""

    @property
    def id(self) -> str: ...

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def input_schema(self) -> Any: ...

    @property
    def output_validator(self) -> Draft202012Validator | None: ...

Next = Callable[..., Awaitable[Any]]


@dataclass
class FilterCall:
    """One call as a filter sees it. ``arguments`` may be changed (or replaced) before ``next()``."""

    tool: Tool
    arguments: dict[str, Any]
    context: CallContext
    side: str  # where the tool runs: "server", or "client" (a browser page)
    state: dict[str, Any] = field(default_factory=dict)  # for filters of one call to share values

    @property
    def tool_id(self) -> str:
        return self.tool.id

    @property
    def definition(self) -> ToolDefinition:
        return self.tool.definition

    @property
    def surface(self) -> str | None:
        """Which surface the call came in by (rest, mcp, chat, cli), when the surface says."""
        return self.context.surface


@dataclass(frozen=True, eq=False)
class Filter:
    """A resolved filter: ``run(call, next)`` is always async, whatever the admin's function is."""

    name: str  # as written: the built-in's name or module:function, for messages and logs
    run: Callable[[FilterCall, Next], Awaitable[Any]]


class FilterProblem(ValueError):
    """A filter spec that cannot be used; ``path`` leads from the spec to the node that is wrong."""

    def __init__(self, message: str, path: Sequence[str | int] = ()):
        self.path = tuple(path)
        super().__init__(message)
