"""One OpenAPI document → one ``UpstreamTool`` per operation, each with the ``http:`` binding a YAML author
would write for it.

Input schema: the operation's path, query and header parameters (path-level ones too, overridden by the
operation's) and its request body make ONE object schema. The body is **flattened** — its properties become
top-level arguments — when it is a plain JSON object (``type: object`` with ``properties``, no ``allOf``/
``oneOf``/``anyOf``/``not`` at its top, no schema for ``additionalProperties``), none of its properties is also a
parameter's name, and it is required or has no required property of its own (else "send it or not" would be
lost). Otherwise it is one argument, ``body``. A parameter whose name two locations share (``id`` in the path and
in the query) is ``<name>_<in>`` for the later one. Left out, with a warning: a parameter where one of the
operation's security schemes sends its secret (any case: the upstream would get the model's value beside the
secret's), a header parameter the gateway's client sets or a proxy reads (``gateway.definitions.header_rules``), named
``Cookie``, or whose name no header can carry (``{{ x }}``), and a cookie parameter whose name no cookie can have
(not a token: ``a; admin``, ``{{ x }}``). Other names are sent as written, ``{{ x }}`` too (a document is data).
The shapes are what a model handles best: flat, named arguments when the API allows, the API's own structure
when it does not.

Binding: ``method``; ``url`` = the server URL (``server_url``, else the operation's, path's or document's
``servers[0]`` with its variables' defaults; a relative one is resolved against the document's URL) + the path,
each ``{param}`` a ``{{ args.param }}`` (percent-encoded as one segment by the binding); ``query`` and
``headers`` templates, the cookie parameters (each left out when omitted or null) and an apiKey cookie in one
``Cookie`` header, whose values the binding encodes as one cookie-value each; ``json`` (or ``form``) body.
Security: ``gateway.sources.openapi_security``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urljoin

from ..definitions.header_rules import is_routing, is_sendable, is_transport
from ..errors import Problem
from .expansion import UpstreamTool
from .openapi_schema import Converter, Path
from .openapi_security import Security, literal, object_or_empty

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
LOCATIONS = ("path", "query", "header", "cookie")
# OpenAPI: header parameters of these names SHALL be ignored (the body, security and Accept say them).
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_PARAMETER = re.compile(r"\{([^{}/]+)\}")


def argument(name: str) -> str:
    """The template reading argument ``name``."""
    return f"{{{{ {_reference(name)} }}}}"


def _reference(name: str) -> str:
    """The expression reading argument ``name`` (subscript form when it is not an identifier: ``X-Request-Id``)."""
    return f"args.{name}" if _IDENTIFIER.match(name) else f"args[{json.dumps(name)}]"


def _cookie(name: str, key: str) -> str:
    """Cookie ``name`` from argument ``key``, or nothing when the argument is omitted or null: one Cookie header
    holds every cookie parameter, and the binding drops the empty pairs and encodes each value as one
    cookie-value."""
    value = _reference(key)
    return f"{{% if {value} is defined and {value} is not none %}}{name}={{{{ {value} }}}}{{% endif %}}"


class Operations:
    """Reads the operations of one parsed document (``data``); problems are (path in the document, message,
    severity) for the caller to locate."""

    def __init__(self, data: Mapping[str, Any], *, security: Mapping[str, str], server_url: str | None,
                 document_url: str | None, auth: Mapping[str, Any] | None = None):
        self.data = data
        self.converter = Converter(data, openapi_30=str(data.get("openapi", "")).startswith("3.0"))
        self.problems = self.converter.problems
        # The source's ``auth:`` (tokens from an identity provider), given to every operation's binding.
        self.auth = auth
        self.security = Security(data, self.converter, security, bool(auth), self._problem)
        self.server_url = server_url
        self.document_url = document_url

    def count(self) -> int:
        """How many operations the document declares (what ``tools`` would convert), without converting them."""
        return sum(1 for _ in self._operations())

    def tools(self) -> list[UpstreamTool]:
        found = []
        for route, method, item, operation, where in self._operations():
            tool = self._tool(route, method, item, operation, where)
            if tool is not None:
                found.append(tool)
        return found

    def _operations(self) -> Iterator[tuple[str, str, Mapping[str, Any], Mapping[str, Any], Path]]:
        paths = self.data.get("paths")
        for route, item in (paths.items() if isinstance(paths, Mapping) else ()):
            if not isinstance(item, Mapping):
                continue
            item, item_path = self.converter.resolve(item, ("paths", route))
            item = object_or_empty(item)
            for method in METHODS:
                operation = item.get(method)
                if isinstance(operation, Mapping):
                    yield route, method, item, operation, (*item_path, method)

    def _problem(self, path: Path, message: str, severity: str = "warning") -> None:
        self.problems.append((path, message, severity))

    def _tool(self, route: str, method: str, item: Mapping[str, Any], operation: Mapping[str, Any],
              where: Path) -> UpstreamTool | None:
        name = operation.get("operationId")
        if not isinstance(name, str) or not name:
            name = re.sub(r"[^A-Za-z0-9]+", "_", f"{method}_{route}").strip("_")
            self._problem(where, f"{method.upper()} {route} has no operationId: its tool is named '{name}'")
        base = self._server(operation, item, where)
        if base is None:
            return None
        properties: dict[str, Any] = {}
        required: list[str] = []
        http: dict[str, Any] = {"method": method.upper()}
        query: dict[str, Any] = {}
        headers: dict[str, Any] = {}
        cookies: list[str] = []
        path_arguments: dict[str, str] = {}
        credentials = self.security.credentials(operation)
        for parameter, at in self._parameters(item, operation, where):
            location, original = parameter["in"], parameter["name"]
            if location == "header" and original.lower() in IGNORED_HEADERS:
                continue
            refused = self._refusal(location, original, credentials)
            if refused:
                self._problem(at, f"{location} parameter '{original}' {refused}: it is left out of the tool's "
                                  "arguments")
                continue
            key = original if original not in properties else f"{original}_{location}"
            properties[key] = self._parameter_schema(parameter, at)
            if parameter.get("required") or location == "path":
                required.append(key)
            if location == "path":
                path_arguments[original] = key
            elif location == "query":
                query[original] = argument(key)
            elif location == "header":
                headers[original] = argument(key)
            else:
                cookies.append(_cookie(original, key))
        missing = [p for p in _PATH_PARAMETER.findall(route) if p not in path_arguments]
        if missing:
            self._problem(where, f"{method.upper()} {route}: path parameter(s) {', '.join(missing)} are not declared "
                                 "in its parameters: the operation is left out", "warning")
            return None
        pieces = _PATH_PARAMETER.split(route)  # literal text, a parameter's name, literal text, ...
        url = literal(base.rstrip("/")) + "".join(argument(path_arguments[piece]) if index % 2 else literal(piece)
                                                  for index, piece in enumerate(pieces))
        if not self._body(operation, where, properties, required, http):
            return None
        self.security.apply(operation, query, headers, cookies)
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        http["url"] = url
        if query:
            http["query"] = query
        if headers:
            http["headers"] = headers
        if self.auth:
            http["auth"] = self.auth
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        summary = str(operation.get("summary") or "").strip()
        description = str(operation.get("description") or "").strip()
        return UpstreamTool(name=name, title=summary or name, description=description or summary or name,
                            summary=summary, input_schema=schema, binding={"http": http},
                            annotations=_annotations(method))

    @staticmethod
    def _refusal(location: str, name: str, credentials: Mapping[tuple[str, str], str]) -> str | None:
        """Why an argument may not set the parameter ``name`` (None: it may)."""
        scheme = credentials.get((location, name.lower()))
        if scheme is not None:  # two values upstream, the model's first: which one counts is the upstream's guess
            return f"is where security scheme '{scheme}' sends the source's secret"
        if location in ("header", "cookie") and not is_sendable(name):  # a cookie's name is a token too
            return f"cannot be sent as a {location} name (a token: letters, digits and !#$%&'*+-.^_`|~ only)"
        if location != "header":
            return None
        if is_transport(name):
            return "is set by the gateway's HTTP client from the url, the body and the connection"
        if is_routing(name):
            return "tells proxies and servers where a call comes from or goes, or carries a proxy's credentials"
        if name.lower() == "cookie":  # a second Cookie header beside the cookie parameters' and the scheme's
            return "would be a second Cookie header: cookies are parameters `in: cookie`"
        return None

    def _server(self, operation: Mapping[str, Any], item: Mapping[str, Any], where: Path) -> str | None:
        if self.server_url:
            return self.server_url
        for owner, at in ((operation, where), (item, where[:-1]), (self.data, ())):
            servers = owner.get("servers")
            if isinstance(servers, list) and servers and isinstance(servers[0], Mapping):
                server = servers[0]
                url = str(server.get("url", ""))
                variables = server.get("variables") if isinstance(server.get("variables"), Mapping) else {}
                for variable, spec in variables.items():
                    default = spec.get("default", "") if isinstance(spec, Mapping) else ""
                    url = url.replace(f"{{{variable}}}", str(default))
                break
        else:
            url, at = "/", ()
        if not re.match(r"^https?://", url, re.IGNORECASE):
            if self.document_url is None:
                self._problem((*at, "servers") if at or "servers" in self.data else (),
                              f"the server URL {url!r} is not absolute: give the source's `server_url`", "error")
                return None
            url = urljoin(self.document_url, url)
        return url

    def _parameters(self, item: Mapping[str, Any], operation: Mapping[str, Any], where: Path):
        merged: dict[tuple[str, str], tuple[Mapping[str, Any], Path]] = {}
        for owner, at in ((item, (*where[:-1], "parameters")), (operation, (*where, "parameters"))):
            listed = owner.get("parameters")
            for index, raw in enumerate(listed if isinstance(listed, list) else ()):
                parameter, place = self.converter.resolve(raw, (*at, index))
                if not isinstance(parameter, Mapping) or parameter.get("in") not in LOCATIONS or not isinstance(
                        parameter.get("name"), str):
                    self._problem(place, "a parameter needs a 'name' and 'in' (path, query, header or cookie): "
                                         "left out", "warning")
                    continue
                merged[parameter["in"], parameter["name"]] = (parameter, place)
        return list(merged.values())

    def _parameter_schema(self, parameter: Mapping[str, Any], at: Path) -> Any:
        schema, schema_at = parameter.get("schema"), (*at, "schema")
        content = parameter.get("content")
        if schema is None and isinstance(content, Mapping) and content:
            media = next(iter(content))
            schema, schema_at = object_or_empty(content[media]).get("schema", {}), (*at, "content", media, "schema")
        converted = self.converter.convert(schema if schema is not None else {}, schema_at)
        description = parameter.get("description")
        if description and isinstance(converted, dict) and "description" not in converted:
            converted = {**converted, "description": str(description)}
        if parameter.get("deprecated") and isinstance(converted, dict):
            converted = {**converted, "deprecated": True}
        return converted

    def _body(self, operation: Mapping[str, Any], where: Path, properties: dict[str, Any], required: list[str],
              http: dict[str, Any]) -> bool:
        """Add the request body to the schema and the binding; False when the operation must be left out."""
        raw = operation.get("requestBody")
        if raw is None:
            return True
        body, at = self.converter.resolve(raw, (*where, "requestBody"))
        body = object_or_empty(body)
        content = object_or_empty(body.get("content"))
        media = next((m for m in content if _is_json(m)), None)
        kind = "json"
        if media is None:
            media = next((m for m in content if m.split(";")[0].strip() == "application/x-www-form-urlencoded"), None)
            kind = "form"
        body_required = body.get("required") is True
        if media is None:
            severity = "left out" if body_required else "served without a body"
            self._problem(at, f"request body media type(s) {', '.join(content) or 'none'} are not supported "
                              f"(JSON and form only): the operation is {severity}")
            return not body_required
        schema = self.converter.convert(object_or_empty(content[media]).get("schema", {}), (*at, "content", media, "schema"))
        own_required = schema.get("required") if isinstance(schema, dict) else None
        own_required = [name for name in own_required if isinstance(name, str)] if isinstance(own_required, list) else []
        if _flat(schema) and not set(schema["properties"]) & set(properties) and (body_required or not own_required):
            properties.update(schema["properties"])
            required += [name for name in own_required if name in schema["properties"]]
            http[kind] = {name: argument(name) for name in schema["properties"]}
            return True
        name = "body" if "body" not in properties else "request_body"
        properties[name] = schema
        if body_required:
            required.append(name)
        http[kind] = argument(name)
        return True

def _is_json(media: str) -> bool:
    kind = media.split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json") or kind == "*/*"


def _flat(schema: Any) -> bool:
    return (isinstance(schema, dict) and schema.get("type") == "object" and isinstance(schema.get("properties"), dict)
            and bool(schema["properties"]) and not {"allOf", "oneOf", "anyOf", "not"} & set(schema)
            and not isinstance(schema.get("additionalProperties"), dict))


def _annotations(method: str) -> dict[str, bool]:
    if method in ("get", "head", "options"):
        return {"read_only": True}
    if method == "delete":
        return {"destructive": True, "idempotent": True}
    if method == "put":
        return {"idempotent": True}
    return {}


def located(document: Any, problems: list[tuple[Path, str, str]], label: str) -> list[Problem]:
    """(path, message, severity) → Problems at the document's file:line:col, each naming its JSON pointer."""
    found = []
    for path, message, severity in problems:
        pointer = "#/" + "/".join(str(step).replace("~", "~0").replace("/", "~1") for step in path)
        if document is not None:
            line, column = document.position(list(path))
        else:
            line, column = 1, 1
        found.append(Problem(label, line, column, f"{pointer}: {message}", severity))
    return found
