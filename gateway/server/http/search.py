"""What one caller's search may find (``gateway.search.search``'s ``reach`` and ``allowed``): the tools that caller
may use, narrowed by the request's toolsets and tags, exactly as a listing with the same filters shows them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...catalog.snapshot import Catalog, Tool
from .auth import Caller


def scoped(caller: Caller, catalog: Catalog, toolsets: Sequence[str] = (), tags: Sequence[str] = ()) -> dict[str, Any]:
    if not toolsets and not tags:
        return {"reach": caller.reach, "allowed": caller.may_use}
    selected = {tool.id for tool in catalog.select(toolsets=toolsets, tags=tags)}

    def allowed(tool: Tool) -> bool:
        return tool.id in selected and caller.may_use(tool)

    return {"reach": (caller.reach, tuple(sorted(toolsets)), tuple(sorted(tags))), "allowed": allowed}
