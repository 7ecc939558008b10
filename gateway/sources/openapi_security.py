"""An OpenAPI document's security, applied to each operation's binding: the first of the operation's security
requirements whose schemes the source gives values for (``security: {scheme: "{{ secrets.X }}"}``) — apiKey →
its header, query parameter or cookie; http bearer (and oauth2 / openIdConnect) → ``Authorization: Bearer
<value>``; http basic → ``Authorization: Basic base64(<value>)``, the value written ``user:password``. A source's
``auth:`` (a token from an identity provider, which the binding sends) stands for bearer, oauth2 and openIdConnect
schemes. Where apiKey schemes send their secrets is never an argument's to set (``credentials``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from .openapi_schema import Converter, Path

_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class Security:
    def __init__(self, data: Mapping[str, Any], converter: Converter, values: Mapping[str, str], auth: bool,
                 problem: Callable[[Path, str], None]):
        self.data = data
        self.converter = converter
        self.values = values
        self.auth = auth
        self.problem = problem
        self.unsatisfied: dict[str, int] = {}  # security scheme without a value -> operations that needed it
        self.schemes: dict[str, Mapping[str, Any]] = {}  # security scheme name -> its object, resolved

    def credentials(self, operation: Mapping[str, Any]) -> dict[tuple[str, str], str]:
        """(in, lower-cased name) → scheme, for every apiKey scheme the operation's security requirements name,
        whether or not the source gives its value: a credential is the admin's to give, never the model's."""
        found = {}
        for requirement in self.requirements(operation):
            for name in requirement:
                scheme = self.scheme(name)
                if scheme.get("type") == "apiKey" and scheme.get("in") in ("header", "query", "cookie"):
                    found[scheme["in"], str(scheme.get("name", name)).lower()] = name
        return found

    def requirements(self, operation: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        requirements = operation.get("security", self.data.get("security"))
        return [r for r in requirements if isinstance(r, Mapping)] if isinstance(requirements, list) else []

    def scheme(self, name: str) -> Mapping[str, Any]:
        if name not in self.schemes:  # resolved once: a broken $ref is one problem, not one per operation
            schemes = object_or_empty(object_or_empty(self.data.get("components")).get("securitySchemes"))
            self.schemes[name] = object_or_empty(self.converter.resolve(schemes.get(name, {}),
                                                                        ("components", "securitySchemes", name))[0])
        return self.schemes[name]

    def by_auth(self, name: str) -> bool:
        """Whether the source's ``auth:`` stands for security scheme ``name``: a bearer token of any kind."""
        scheme = self.scheme(name)
        kind = scheme.get("type")
        return self.auth and (kind in ("oauth2", "openIdConnect") or (
            kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer"))

    def apply(self, operation: Mapping[str, Any], query: dict[str, Any], headers: dict[str, Any],
              cookies: list[str]) -> None:
        """Put the chosen requirement's values where its schemes send them."""
        options = self.requirements(operation)
        if not options:
            return
        chosen = next((r for r in options if all(name in self.values or self.by_auth(name) for name in r)), None)
        if chosen is None:
            for name in options[0]:
                self.unsatisfied[name] = self.unsatisfied.get(name, 0) + 1
            return
        for name in chosen:
            if name not in self.values:  # the source's auth: sends its token
                continue
            scheme = self.scheme(name)
            value = self.values[name]
            kind = scheme.get("type")
            if kind == "apiKey":
                place, key = scheme.get("in"), str(scheme.get("name", name))
                if place == "query":
                    query[key] = value
                elif place == "cookie":
                    cookies.append(f"{literal(key)}={value}")
                else:
                    headers[key] = value
            elif kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
                headers["Authorization"] = f"Basic {{{{ ({_expression(value)}) | b64encode }}}}"
            elif kind in ("http", "oauth2", "openIdConnect"):
                headers["Authorization"] = f"Bearer {value}"
            else:
                self.problem(("components", "securitySchemes", name),
                             f"security scheme '{name}' of type {kind!r} is not supported: calls go without it")


def literal(text: str) -> str:
    """A document's ``text`` as template text that renders as itself: with every ``{`` an expression, no ``{{``,
    ``{%`` or ``{#`` in a path, a server URL or a name can start a template (a document is data, as arguments
    are). In a URL's scheme, host or port that is a template, which the http binding refuses."""
    return text.replace("{", '{{ "{" }}')


def _expression(value: str) -> str:
    """A text with ``{{ ... }}`` parts (``{{ secrets.U }}:{{ secrets.P }}``) as one Jinja expression."""
    parts, last = [], 0
    for match in _TEMPLATE.finditer(value):
        if match.start() > last:
            parts.append(json.dumps(value[last:match.start()]))
        parts.append(f"({match.group(1).strip()})")
        last = match.end()
    if last < len(value):
        parts.append(json.dumps(value[last:]))
    return " ~ ".join(parts) or '""'


def object_or_empty(value: Any) -> Mapping[str, Any]:
    """An OpenAPI object where one is expected; anything else (a document written wrong) reads as empty."""
    return value if isinstance(value, Mapping) else {}
