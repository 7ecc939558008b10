"""The prompts and resources of a catalog, built beside its tools: those the definitions declare
(``gateway.catalog.prompts``, ``gateway.catalog.resources``) and those of ``mcp`` sources (``gateway.sources.mcp_content``).

Built on every build (there are few, and a ``file:`` must be read again to notice an edit); each problem in a
declared one is located in its entry, and any makes the build fail as a tool's would. A name or URI taken
already (declared ones first, then sources in file order) is not served again from a source, and a warning says
so. ``digest`` is the version of what they serve beyond the YAML (whose digest the catalog's version has
already): the files they read, what the upstreams listed. They are served as the snapshot's ``Content``
(``gateway.catalog.snapshot``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from ..bindings import BindingProblems, BuildEnv
from ..definitions.load import Definitions
from ..errors import Problem
from .snapshot import EMPTY, Content


def build_content(definitions: Definitions, env: BuildEnv, sources_status: Iterable[Mapping[str, Any]] = ()) -> Content:
    """The content of ``definitions``; ``sources_status``: the build's sources as /status shows them (an ``mcp``
    source whose tools were listed just now, health ok, is listed for its prompts and resources too)."""
    healthy = {status["id"] for status in sources_status if status.get("kind") == "mcp" and status.get("health") == "ok"}
    if not definitions.prompts and not definitions.resources and not healthy:
        return EMPTY
    # Imported here: they import Jinja2, which a catalog of Python tools alone never needs (tests/test_lazy_imports).
    from .prompts import build_prompt
    from .resources import build_resource

    problems: list[Problem] = []
    resources: dict[str, Any] = {}
    for entry in definitions.resources:
        try:
            resources.setdefault(entry.key, build_resource(entry, env))  # a repeat was reported when loaded
        except BindingProblems as exc:
            problems += exc.problems
    prompts: dict[str, Any] = {}
    for entry in definitions.prompts:
        try:
            prompts.setdefault(entry.key, build_prompt(entry, env, resources))
        except BindingProblems as exc:
            problems += exc.problems
    digest = hashlib.sha256("".join(f"{uri}\0{r.digest}\0" for uri, r in resources.items()).encode())
    warnings: list[Problem] = []
    if healthy:
        # Imported only for a directory with mcp sources: it imports the SDK's client side.
        from ..sources.mcp_content import upstream_content

        found, listed, warnings, listed_digest = upstream_content(definitions.sources, healthy, env.settings,
                                                                  env.mcp_pool)
        digest.update(listed_digest.encode())
        for prompt in found:
            _add(prompts, prompt.id, prompt, "prompt", warnings)
        for resource in listed:
            _add(resources, resource.uri, resource, "resource", warnings)
    return Content(prompts, resources, tuple(problems), tuple(warnings), digest.hexdigest())


def _add(served: dict[str, Any], key: str, entry: Any, what: str, warnings: list[Problem]) -> None:
    taken = served.setdefault(key, entry)
    if taken is not entry:
        source = entry.origin.source
        warnings.append(source.problem(["mcp"], f"its {what} '{key[:200]}' is not served: the name is taken "
                                                f"(by {_owner(taken)})", key=True, severity="warning"))


def _owner(entry: Any) -> str:
    origin = getattr(entry, "origin", None)
    return f"source '{origin.source.id}'" if origin is not None else entry.definition.at()
