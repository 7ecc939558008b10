"""The prompts and resources of a catalog, built beside its tools from the same definitions.

Built on every build (there are few, and a ``file:`` must be read again to notice an edit); each problem is
located in its entry, and any makes the build fail as a tool's would. The version of what they serve (their
declarations are in the YAML, whose digest the catalog's version has already; the files they read are not) is
``digest``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from .bindings import BindingProblems, BuildEnv
from .definitions import Definitions
from .errors import Problem
from .prompts import Prompt, build_prompt
from .resources import Resource, build_resource


@dataclass(frozen=True)
class Content:
    prompts: Mapping[str, Prompt] = field(default_factory=dict)
    resources: Mapping[str, Resource] = field(default_factory=dict)  # by uri (a template's as written)
    problems: tuple[Problem, ...] = ()
    digest: str = ""

    def resource_for(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        """The resource a read of ``uri`` reads, with the values of its template's variables."""
        resource = self.resources.get(uri)
        if resource is not None and resource.template is None:
            return resource, {}
        for resource in self.resources.values():
            variables = resource.template.match(uri) if resource.template else None
            if variables is not None:
                return resource, variables
        return None


EMPTY = Content()


def build_content(definitions: Definitions, env: BuildEnv) -> Content:
    declared_prompts, declared_resources = definitions.prompts, definitions.resources
    if not declared_prompts and not declared_resources:
        return EMPTY
    problems: list[Problem] = []
    resources: dict[str, Resource] = {}
    for entry in declared_resources:
        try:
            resources.setdefault(entry.key, build_resource(entry, env))  # a repeat was reported when loaded
        except BindingProblems as exc:
            problems += exc.problems
    prompts: dict[str, Prompt] = {}
    for entry in declared_prompts:
        try:
            prompts.setdefault(entry.key, build_prompt(entry, env, resources))
        except BindingProblems as exc:
            problems += exc.problems
    digest = hashlib.sha256("".join(f"{uri}\0{r.digest}\0" for uri, r in resources.items()).encode())
    return Content(prompts, resources, tuple(problems), digest.hexdigest())
