"""Prompts declared in YAML, built for serving: each message's text a sandboxed template compiled now, each
image read now (``gateway.catalog.resources.read_confined``), each embedded resource a declared one's content or a
template of its own.

A client's arguments are data, never templates; an argument the prompt does not declare, or a required one
missing, is refused (``PromptArgumentsInvalid``) before anything renders.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..bindings import BindingProblems, BuildEnv
from ..context import CallContext
from ..definitions.prompts_resources import Declared
from ..templates.compile import OMIT, RenderError, Template
from .resources import Resource, compile_text, read_confined, starting_with


class PromptArgumentsInvalid(ValueError):
    """The arguments of a prompts/get do not fit the prompt (JSON-RPC invalid params)."""


class PromptFailed(Exception):
    """A template failed while rendering (a sandbox limit, a type error in an expression)."""


@dataclass(frozen=True)
class _Message:
    role: str
    text: Template | None = None  # a text message
    fixed: Mapping[str, Any] | None = None  # an image or a declared resource's content block, made when built
    uri: Template | None = None  # an embedded resource of the prompt's own: its uri and text
    resource_text: Template | None = None
    mime_type: str = "text/plain"

    def render(self, scope: Mapping[str, Any]) -> dict[str, Any]:
        if self.fixed is not None:
            return {"role": self.role, "content": self.fixed}
        if self.text is not None:
            return {"role": self.role, "content": {"type": "text", "text": _text(self.text, scope)}}
        assert self.uri is not None and self.resource_text is not None
        return {"role": self.role, "content": {"type": "resource", "resource": {
            "uri": _text(self.uri, scope), "mimeType": self.mime_type, "text": _text(self.resource_text, scope)}}}


@dataclass(frozen=True, eq=False)
class Prompt:
    definition: Declared
    messages: tuple[_Message, ...]

    @property
    def id(self) -> str:
        return self.definition.key

    @property
    def toolsets(self) -> tuple[str, ...]:
        return self.definition.toolsets

    @property
    def arguments(self) -> list[Mapping[str, Any]]:
        return self.definition.raw.get("arguments") or []

    def entry(self) -> dict[str, Any]:
        """Its prompts/list entry."""
        raw = self.definition.raw
        entry: dict[str, Any] = {"name": self.id, "description": raw["description"]}
        if raw.get("name"):
            entry["title"] = raw["name"]
        if self.arguments:
            entry["arguments"] = [{key: argument[key] for key in ("name", "description", "required") if key in argument}
                                  for argument in self.arguments]
        return entry

    def get(self, arguments: Mapping[str, str] | None) -> dict[str, Any]:
        """The prompts/get result for ``arguments``."""
        given = dict(arguments or {})
        declared = [argument["name"] for argument in self.arguments]
        for name in given:
            if name not in declared:
                raise PromptArgumentsInvalid(f"prompt '{self.id}' has no argument '{name[:64]}' (arguments: "
                                             f"{', '.join(declared) or 'none'})")
        for argument in self.arguments:
            if argument.get("required") and argument["name"] not in given:
                raise PromptArgumentsInvalid(f"prompt '{self.id}' needs argument '{argument['name']}'")
        scope = {"args": given}
        result: dict[str, Any] = {"description": self.definition.raw["description"],
                                  "messages": [message.render(scope) for message in self.messages]}
        return result

    async def answer(self, arguments: Mapping[str, str] | None, context: CallContext) -> dict[str, Any]:
        """prompts/get, as every prompt answers it (an upstream's is forwarded: ``gateway.sources.mcp_content``)."""
        return self.get(arguments)

    async def completions(self, argument: str, value: str) -> list[str]:
        return self.complete(argument, value)

    def complete(self, argument: str, value: str) -> list[str]:
        for declared in self.arguments:
            if declared["name"] == argument:
                return starting_with(declared.get("completions") or [], value)
        return []


def _text(template: Template, scope: Mapping[str, Any]) -> str:
    try:
        rendered = template.render(scope)
    except RenderError as exc:
        raise PromptFailed(f"a template failed to render: {exc}") from None
    return "" if rendered is OMIT else str(rendered)


def build_prompt(entry: Declared, env: BuildEnv, resources: Mapping[str, Resource]) -> Prompt:
    """The prompt ``entry`` declares, or ``BindingProblems`` with every problem found in it. ``resources``: the
    catalog's, by uri, which a message may embed."""
    arguments = entry.raw.get("arguments") or []
    names = tuple(argument["name"] for argument in arguments)
    problems = [entry.problem(["arguments", index, "name"], f"argument '{name}' is declared twice")
                for index, name in enumerate(names) if name in names[:index]]
    messages = []
    for index, raw in enumerate(entry.raw["messages"]):
        try:
            messages.append(_message(entry, ["messages", index], raw, names, env, resources))
        except BindingProblems as exc:
            problems += exc.problems
    if problems:
        raise BindingProblems(problems)
    return Prompt(entry, tuple(messages))


def _message(entry: Declared, where: list[str | int], raw: Mapping[str, Any], names: tuple[str, ...], env: BuildEnv,
             resources: Mapping[str, Resource]) -> _Message:
    role = raw["role"]
    if "text" in raw:
        return _Message(role, text=compile_text(entry, [*where, "text"], raw["text"], names))
    if "image" in raw:
        image = raw["image"]
        data = read_confined(entry, [*where, "image", "file"], image["file"], env)
        return _Message(role, fixed={"type": "image", "data": base64.b64encode(data).decode("ascii"),
                                     "mimeType": image["mime_type"]})
    resource = raw["resource"]
    if "text" in resource:
        return _Message(role, uri=compile_text(entry, [*where, "resource", "uri"], resource["uri"], names),
                        resource_text=compile_text(entry, [*where, "resource", "text"], resource["text"], names),
                        mime_type=resource.get("mime_type", "text/plain"))
    declared = resources.get(resource["uri"])
    if declared is None or declared.template is not None or declared.content is None:
        fixed = sorted(uri for uri, r in resources.items() if r.content is not None and r.template is None)
        message = (f"'{resource['uri']}' is not a resource declared with text or a file (declared: "
                   f"{', '.join(fixed[:10]) or 'none'}); or give the embedded resource's text here")
        raise BindingProblems([entry.problem([*where, "resource", "uri"], message)])
    contents = (declared.content if isinstance(declared.content, str) else
                {"blob": base64.b64encode(declared.content).decode("ascii")})
    block = {"uri": declared.uri, "mimeType": declared.mime_type,
             **({"text": contents} if isinstance(contents, str) else contents)}
    return _Message(role, fixed={"type": "resource", "resource": block})
