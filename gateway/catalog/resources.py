"""Resources declared in YAML, built for serving: fixed content (inline ``text:`` or a ``file:`` read when the
catalog is built), a template over a resource template's URI variables, or one HTTP request (the http binding,
its host fixed by the definition, the variables its arguments).

A ``file:`` is read once per build, under the rule browser scripts follow: a relative path with no ``..``, whose
real path lies inside the real definitions directory, at most ``max_file_bytes``. Its digest is part of the
catalog's version, so an edit is a reload, and a subscriber hears ``notifications/resources/updated``.
Text that is not UTF-8 is served as a base64 ``blob``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bindings import BindingProblems, BuildEnv, builder
from ..context import CallContext, Executor
from ..definitions.model import Scope, ToolDefinition
from ..definitions.paths import real_inside
from ..definitions.prompts_resources import Declared
from ..definitions.uri_templates import UriTemplate, UriTemplateInvalid, is_uri_template, parse_uri_template
from ..templates.compile import OMIT, RenderError, Template, TemplateInvalid, compile_template, is_template

ARGUMENT_NAMES = frozenset({"args"})  # what a prompt's or a resource's template sees: never secrets
MAX_COMPLETIONS = 100  # MCP's cap on completion values in one answer


class ResourceFailed(Exception):
    """A read that could not be answered (the upstream failed, a template failed): its message says why."""


@dataclass(frozen=True, eq=False)
class Resource:
    definition: Declared
    mime_type: str
    template: UriTemplate | None = None  # a resource template: its URI's variables
    content: str | bytes | None = None  # fixed content: inline text without markup, or a file's bytes
    text: Template | None = None  # text rendered from the URI's variables
    executor: Executor | None = None  # the http binding
    digest: str = ""  # of what a read answers, when that is fixed when built: a change notifies subscribers

    @property
    def uri(self) -> str:
        return self.definition.key

    @property
    def toolsets(self) -> tuple[str, ...]:
        return self.definition.toolsets

    @property
    def subscribable(self) -> bool:
        return self.definition.raw.get("subscribe") is True

    def entry(self) -> dict[str, Any]:
        """Its resources/list entry (or resources/templates/list, with ``uriTemplate``)."""
        raw = self.definition.raw
        entry: dict[str, Any] = {"uriTemplate" if self.template else "uri": self.uri, "name": raw["name"],
                                 "mimeType": self.mime_type}
        for key in ("title", "description"):
            if raw.get(key):
                entry[key] = raw[key]
        return entry

    async def read(self, uri: str, variables: Mapping[str, str], context: CallContext) -> list[dict[str, Any]]:
        """The ``contents`` of reading ``uri`` (this resource's, or one of its template's with ``variables``)."""
        if self.executor is not None:
            value = await self.executor(dict(variables), context)
            return [_contents(uri, self.mime_type, value if isinstance(value, str | bytes) else json.dumps(value))]
        if self.text is not None:
            try:
                rendered = self.text.render({"args": dict(variables)})
            except RenderError as exc:
                raise ResourceFailed(f"resource '{self.uri}': its text failed to render: {exc}") from None
            return [_contents(uri, self.mime_type, "" if rendered is OMIT else str(rendered))]
        return [_contents(uri, self.mime_type, self.content if self.content is not None else "")]

    async def completions(self, variable: str, value: str) -> list[str]:
        return self.complete(variable, value)

    def complete(self, variable: str, value: str) -> list[str]:
        completions = self.definition.raw.get("completions") or {}
        return starting_with(completions.get(variable) or [], value)


def starting_with(values: list[str], typed: str) -> list[str]:
    """The declared completion values that start with what the client typed (case-insensitive)."""
    typed = typed.casefold()
    return [value for value in values if value.casefold().startswith(typed)]


def _contents(uri: str, mime_type: str, value: str | bytes) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {"uri": uri, "mimeType": mime_type, "blob": base64.b64encode(value).decode("ascii")}
    return {"uri": uri, "mimeType": mime_type, "text": value}


def read_confined(entry: Declared, where: list[str | int], relative: str, env: BuildEnv) -> bytes:
    """The bytes of ``relative`` below the definitions directory; raises ``BindingProblems`` at ``where`` when it
    leads outside it (``..``, an absolute path, a link), is not a regular file, or is larger than allowed."""
    def refuse(message: str) -> BindingProblems:
        return BindingProblems([entry.problem(where, message)])

    if os.path.isabs(relative) or ".." in Path(relative).parts:
        raise refuse(f"'{relative}': give a path below the definitions directory, without '..'")
    path = env.root / relative
    real = real_inside(path, os.path.realpath(env.root))
    if real is None:
        raise refuse(f"'{relative}' leads outside the definitions directory (to {os.path.realpath(path)})")
    limit = env.settings.max_file_bytes
    try:
        # Opened without blocking and then looked at: a FIFO put there must not hang the build.
        with open(os.open(real, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise refuse(f"'{relative}' is not a regular file")
            data = file.read(limit + 1)
    except OSError as exc:
        raise refuse(f"'{relative}' cannot be read: {exc.strerror}") from None
    if len(data) > limit:
        raise refuse(f"'{relative}' is larger than max_file_bytes ({limit} bytes)")
    return data


def build_resource(entry: Declared, env: BuildEnv) -> Resource:
    """The resource ``entry`` declares, or ``BindingProblems`` with every problem found in it."""
    raw = entry.raw
    template = None
    if is_uri_template(entry.key):
        try:
            template = parse_uri_template(entry.key)
        except UriTemplateInvalid as exc:
            raise BindingProblems([entry.problem(["uri"], f"invalid resource template: {exc}")]) from None
    variables = template.variables if template else ()
    problems = [entry.problem(["completions", name], f"'{name}' is not a variable of the uri "
                                                     f"(variables: {', '.join(variables) or 'none'})", key=True)
                for name in raw.get("completions") or {} if name not in variables]
    if template is not None and raw.get("subscribe"):
        problems.append(entry.problem(["subscribe"], "a resource template cannot be subscribed to: subscribe to "
                                                     "a fixed uri"))
    try:
        resource = _built(entry, template, env)
    except BindingProblems as exc:
        problems += exc.problems
    if problems:
        raise BindingProblems(problems)
    return resource


def _built(entry: Declared, template: UriTemplate | None, env: BuildEnv) -> Resource:
    raw = entry.raw
    variables = template.variables if template else ()
    mime_type = raw.get("mime_type")
    if "file" in raw:
        data = read_confined(entry, ["file"], raw["file"], env)
        try:
            content: str | bytes = data.decode("utf-8")
        except UnicodeDecodeError:
            content = data
        default = "text/plain" if isinstance(content, str) else "application/octet-stream"
        return Resource(entry, mime_type or default, template, content,
                        digest=hashlib.sha256(data).hexdigest())
    if "binding" in raw:
        return Resource(entry, mime_type or "text/plain", template, executor=_http(entry, variables, env))
    if not is_template(raw["text"]):
        return Resource(entry, mime_type or "text/plain", template, raw["text"],
                        digest=hashlib.sha256(raw["text"].encode()).hexdigest())
    return Resource(entry, mime_type or "text/plain", template, text=compile_text(entry, ["text"], raw["text"],
                                                                                   variables))


def compile_text(entry: Declared, where: list[str | int], source: str, arguments: tuple[str, ...]) -> Template:
    """``source`` compiled as a template that reads only ``args`` and only the ``arguments`` named."""
    try:
        text = compile_template(source, ARGUMENT_NAMES)
    except TemplateInvalid as exc:
        raise BindingProblems([entry.problem(where, message) for _, message in exc.problems]) from None
    unknown = sorted(text.references.args - set(arguments))
    if unknown:
        declared = ", ".join(arguments) or "none"
        raise BindingProblems([entry.problem(where, f"template reads argument '{name}', which is not declared "
                                                    f"(declared: {declared})") for name in unknown])
    return text


def _http(entry: Declared, variables: tuple[str, ...], env: BuildEnv) -> Executor:
    """The http binding's executor, built as a tool's is: its variables are the arguments (strings, all given)."""
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in variables},
              "required": list(variables)}
    tool = ToolDefinition(str(entry.raw["name"]), str(entry.raw["name"]), "", "", Scope.SERVER, entry.raw["binding"],
                          input_schema=schema, document=entry.document, index=entry.index, declared_at=entry.path)
    return builder("http")(tool, env).executor
