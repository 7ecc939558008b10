"""``binding: {http: {...}}`` as written in YAML → a checked ``HttpBinding`` (``parse``).

Parse the URL (scheme, host and port are fixed here; ``{{ gateway.base_url }}`` at its start names the gateway
itself, fixed from the settings), compile every template, check that each argument a template reads is in the
input schema and that each secret it reads may be read (``gateway.secrets.refusal``), compile the response
selector; report every problem at its YAML node; warn about secrets missing from the environment.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from .. import secrets as secret_store
from ..definitions.header_rules import is_routing, is_transport
from ..definitions.model import ToolDefinition
from ..errors import Problem
from ..templates.compile import (
    Compiled,
    Template,
    TemplateInvalid,
    compile_template,
    compile_value,
    environment,
    is_template,
)
from ..upstream.address import base_url
from ..upstream.tokens import TokenSource
from . import BindingProblems, BuildEnv, httpauth
from .jsonselect import Selector, SelectorInvalid, compile_selector

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
DEFAULT_MAX_BYTES = 1_048_576
RESPONSE_NAMES = frozenset({"result", "status", "args", "context"})
_URL = re.compile(r"^(?P<scheme>https?)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?P<query>\?[^#]*)?(?P<fragment>#.*)?$",
                  re.IGNORECASE | re.DOTALL)
# The gateway's own origin, at the start of a url only: fixed when the catalog is built, never by a call.
_GATEWAY_ORIGIN = re.compile(r"^\{\{-?\s*gateway\.base_url\s*-?\}\}")
UNSENDABLE_IN_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _segment(value: Any) -> str:
    """A path template's output as one path segment: everything but unreserved characters percent-encoded."""
    encoded = quote(text(value), safe="")
    # A segment of dots would be read as "this" or "parent" directory by the URL parser or the server.
    return encoded.replace(".", "%2E") if set(encoded) <= {"."} else encoded


PATH_ENV = environment(finalize=_segment)
# RFC 6265 cookie-octets: printable ASCII but space, '"', ',', ';' and backslash. Kept as written, so that a value
# which already is one cookie-value (a session token, base64, a JWT, one already percent-encoded) is sent as is.
_COOKIE_OCTETS = "".join(chr(code) for code in range(0x21, 0x7F) if chr(code) not in '",;\\')


def _cookie_value(value: Any) -> str:
    """A Cookie header template's output as exactly one cookie-value, whatever it holds: every byte outside the
    cookie-octets percent-encoded (UTF-8), so a ';' cannot start another cookie nor a line break another header.
    A list or an object is OpenAPI's ``form`` style unexploded (``a,b``; ``key,value,key,value``), its commas
    encoded too; the exploded form would be a query string (``a&k=v``) naming cookies after the value's keys."""
    if isinstance(value, list):
        value = ",".join(text(item) for item in value)
    elif isinstance(value, dict):
        value = ",".join(f"{key},{text(item)}" for key, item in value.items())
    return quote(text(value), safe=_COOKIE_OCTETS)


COOKIE_ENV = environment(finalize=_cookie_value)


def cookie_pairs(rendered: str) -> str:
    """A rendered Cookie header with its empty pairs dropped (an omitted optional cookie leaves ``; ;``); every
    ';' left is the definition's, since values are encoded."""
    return "; ".join(pair.strip() for pair in rendered.split(";") if pair.strip())


def text(value: Any) -> str:
    """A rendered value as text for a URL, a query, a form or a header: JSON spelling for non-strings."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float, list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)  # an undefined value raises here, which rendering turns into OMIT


@dataclass(frozen=True)
class ResponseShape:
    expect: str  # "json", "text" or "auto" (by content type)
    select: Selector | None
    template: Template | None
    max_chars: int | None
    max_bytes: int


@dataclass(frozen=True)
class HttpBinding:
    tool_id: str
    method: str
    origin: httpx.URL
    origin_text: str  # "scheme://host:port", to which the rendered path is appended
    path: Template
    url_query: tuple[tuple[str, str], ...]  # the url's literal query string
    query: Compiled | None
    headers: tuple[tuple[str, Compiled], ...]
    secret_headers: frozenset[str]  # lower-cased names of headers whose value holds a secret
    body_kind: str | None  # "json", "form", "text"
    body: Compiled | None
    attempt_timeout_s: float  # the most one attempt may take (less when the tool's deadline is nearer)
    deadline_s: float  # the tool's timeout, which invoke puts on the whole call: every attempt fits in it
    retries: int
    accept_status: frozenset[int] | None
    follow_redirects: bool
    allow_redirect_hosts: frozenset[str]
    response: ResponseShape
    secrets: frozenset[str]
    auth: TokenSource | None = None  # the token from an identity provider sent as Authorization (httpauth)


class _Problems:
    def __init__(self, definition: ToolDefinition):
        self.definition = definition
        self.errors: list[Problem] = []

    def add(self, path: tuple[str | int, ...], message: str, *, key: bool = False) -> None:
        self.errors.append(self.definition.problem(["binding", "http", *path], message, key=key))

    def compile(self, where: tuple[str | int, ...], value: Any, **options: Any) -> Any:
        try:
            return compile_value(value, **options)
        except TemplateInvalid as exc:
            for path, message in exc.problems:
                self.add((*where, *path), message)
            return None


def parse(definition: ToolDefinition, env: BuildEnv) -> HttpBinding:
    spec = definition.binding["http"]
    problems = _Problems(definition)
    method = spec.get("method", "GET")
    origin, path_source, url_query = _parse_url(_own_origin(spec["url"], env), problems)
    path = problems.compile(("url",), path_source or "/", env=PATH_ENV, typed=False)
    query = problems.compile(("query",), spec["query"]) if "query" in spec else None
    headers = _headers(spec.get("headers", {}), problems)
    body_kind = next((kind for kind in ("json", "form", "text") if kind in spec), None)
    body = problems.compile((body_kind,), spec[body_kind], typed=body_kind != "text") if body_kind else None
    response = _response(spec.get("response", {}), problems)
    auth = httpauth.parse(definition, spec["auth"], env, problems.add) if "auth" in spec else None
    if auth is not None and any(name.lower() == "authorization" for name, _ in headers):
        problems.add(("headers",), "an Authorization header beside 'auth': the token 'auth' gets is sent in it; "
                                   "keep one of the two")

    if definition.source is None:  # a generated binding's keys are a document's names: data, sent as written
        for part in ("query", "form", "headers", "json"):
            _check_keys(spec.get(part), (part,), problems)
    request_parts = [("url", path), ("query", query), (body_kind, body)]
    request_parts += [(("headers", name), compiled) for name, compiled in headers]
    _check_arguments(definition, [*request_parts, (("response", "template"), response.template)], problems)
    secret_names = _secrets(definition, request_parts, env, problems)

    retries = spec.get("retries", 0)
    if retries and method not in IDEMPOTENT_METHODS and not spec.get("retry_unsafe", False):
        problems.add(("retries",), f"retries resend the request, which is not safe for {method}: set "
                                   "'retry_unsafe: true' if the upstream handles a repeated request safely")
    deadline_s = definition.timeout_s or env.settings.default_timeout_s
    attempt_timeout_s = spec.get("timeout_s") or deadline_s / (1 + retries)
    _check_timeouts(definition, env, spec, retries, deadline_s)
    if problems.errors:
        raise BindingProblems(problems.errors)
    return HttpBinding(
        tool_id=definition.id,
        method=method,
        origin=origin,
        origin_text=str(origin).rstrip("/"),
        path=path.tree,
        url_query=tuple(httpx.QueryParams(url_query).multi_items()),
        query=query,
        headers=tuple(headers),
        secret_headers=frozenset(name.lower() for name, compiled in headers if compiled.references.secrets),
        body_kind=body_kind,
        body=body,
        attempt_timeout_s=attempt_timeout_s,
        deadline_s=deadline_s,
        retries=retries,
        accept_status=frozenset(spec["accept_status"]) if "accept_status" in spec else None,
        follow_redirects=spec.get("follow_redirects", True),
        allow_redirect_hosts=frozenset(host.lower() for host in spec.get("allow_redirect_hosts", ())),
        response=response,
        secrets=frozenset(secret_names),
        auth=auth,
    )


def _check_timeouts(definition: ToolDefinition, env: BuildEnv, spec: Mapping[str, Any], retries: int,
                    deadline_s: float) -> None:
    """Every attempt must fit in the tool's timeout (which bounds the whole call), or the later ones never run."""
    timeout_s = spec.get("timeout_s")
    attempts = 1 + retries
    if timeout_s is None or timeout_s * attempts <= deadline_s:
        return
    total = f"timeout_s {timeout_s:g} s × {attempts} attempt{'s' if attempts > 1 else ''} = {timeout_s * attempts:g} s"
    env.warnings.append(definition.problem(
        ["binding", "http", "timeout_s"],
        f"{total}, more than the tool's timeout_s of {deadline_s:g} s: the last attempts are cut short or never "
        "made; raise the tool's timeout_s or lower this one", severity="warning"))


def _own_origin(url: str, env: BuildEnv) -> str:
    """``url`` with ``{{ gateway.base_url }}`` at its start replaced by the address the gateway serves."""
    return _GATEWAY_ORIGIN.sub(lambda _: base_url(env.settings), url, count=1)


def _parse_url(url: str, problems: _Problems) -> tuple[httpx.URL, str, str]:
    match = _URL.match(url)
    if match is None:
        problems.add(("url",), f"invalid url {url!r}: expected http(s)://host[:port]/path")
        return httpx.URL("http://invalid/"), "/", ""
    if is_template(match["authority"]):
        problems.add(("url",), "the url's scheme, host and port are fixed: templates may appear in its path "
                               "only")
    elif "@" in match["authority"]:
        problems.add(("url",), "credentials in the url would be shown wherever the url is: send them in "
                               "'headers' with {{ secrets.NAME }}")
    if match["query"] and is_template(match["query"]):
        problems.add(("url",), "templates in the url's query string: put templated parameters under 'query', "
                               "which encodes them")
    if match["fragment"]:
        problems.add(("url",), f"the url's fragment {match['fragment']!r} is never sent to a server: "
                               "remove it")
    try:
        origin = httpx.URL(f"{match['scheme'].lower()}://{match['authority']}/")
    except httpx.InvalidURL as exc:
        problems.add(("url",), f"invalid url {url!r}: {exc}")
        return httpx.URL("http://invalid/"), "/", ""
    if not origin.host:
        problems.add(("url",), f"invalid url {url!r}: no host")
    return origin, match["path"], (match["query"] or "")[1:]


def _headers(spec: Mapping[str, Any], problems: _Problems) -> list[tuple[str, Compiled]]:
    headers = []
    for name, value in spec.items():
        if is_transport(name):
            problems.add(("headers", name), f"header '{name}' is set by the gateway (from the url, the body and "
                                            "the connection) and cannot be declared", key=True)
            continue
        if isinstance(value, str) and UNSENDABLE_IN_HEADER.search(value.strip("\n")):
            problems.add(("headers", name), f"header '{name}' holds a line break or control character")
            continue
        # A Cookie header's {{ }} outputs are cookie-values, encoded as such: an argument never adds a cookie.
        options = {"env": COOKIE_ENV, "typed": False} if name.lower() == "cookie" else {}
        compiled = problems.compile(("headers", name), value.strip("\n") if isinstance(value, str) else value,
                                    **options)
        if compiled is not None and is_routing(name) and _reads_arguments(compiled):
            problems.add(("headers", name), f"header '{name}' tells proxies and servers where a call comes from "
                                            "or goes, or a proxy's credentials: an argument cannot set it (a fixed "
                                            "value, a secret or a context field can)")
        elif compiled is not None:
            headers.append((name, compiled))
    return headers


def _reads_arguments(compiled: Compiled) -> bool:
    """Whether a value holds anything an argument chose (``{{ args | tojson }}`` holds them all)."""
    return bool(compiled.references.args) or "args" in compiled.references.whole


def _check_keys(value: Any, where: tuple[str | int, ...], problems: _Problems) -> None:
    """Keys (parameter, header and JSON member names) are sent as written: in YAML a template there is the
    author's mistake."""
    if isinstance(value, dict):
        for key, item in value.items():
            if is_template(str(key)):
                problems.add((*where, key), f"'{key}' is a key, and keys are not templates: only values are",
                             key=True)
            _check_keys(item, (*where, key), problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_keys(item, (*where, index), problems)


def _response(spec: Mapping[str, Any], problems: _Problems) -> ResponseShape:
    select = None
    if "select" in spec:
        try:
            select = compile_selector(spec["select"])
        except SelectorInvalid as exc:
            problems.add(("response", "select"), str(exc))
    template = None
    if "template" in spec:
        try:
            template = compile_template(spec["template"], RESPONSE_NAMES)
        except TemplateInvalid as exc:
            for _, message in exc.problems:
                problems.add(("response", "template"), message)
    expect = spec.get("expect", "auto")
    if expect == "text" and select is not None:
        problems.add(("response", "select"), "'select' reads JSON, but 'expect' is text")
    return ResponseShape(expect, select, template, spec.get("max_chars"),
                         spec.get("max_bytes", DEFAULT_MAX_BYTES))


def _located(parts: list[tuple[Any, Compiled | Template | None]]):
    """(YAML path, template) for every template of the request and response parts."""
    for where, compiled in parts:
        where = where if isinstance(where, tuple) else (where,)
        if isinstance(compiled, Template):
            yield where, compiled
        elif compiled is not None:
            for template in compiled.templates():
                yield (*where, *template.path), template


def _check_arguments(definition: ToolDefinition, parts: list, problems: _Problems) -> None:
    properties = (definition.input_schema or {}).get("properties", {})
    for where, template in _located(parts):
        for name in sorted(template.references.args - set(properties)):
            declared = ", ".join(properties) or "none (the tool has no input_schema)"
            problems.add(where, f"template reads argument '{name}', which is not in input_schema.properties "
                                f"(declared: {declared})")


def _secrets(definition: ToolDefinition, parts: list, env: BuildEnv, problems: _Problems) -> set[str]:
    names: set[str] = set()
    for where, template in _located(parts):
        names |= template.references.secrets
        for name in sorted(template.references.secrets):
            refused = secret_store.refusal(name, env.settings)
            if refused is not None:
                problems.add(where, refused)
        for name in secret_store.missing(template.references.secrets):
            env.warnings.append(definition.problem(
                ["binding", "http", *where],
                f"secret '{name}' is not set in the environment: calls of '{definition.id}' fail until it is",
                severity="warning"))
    secret_store.remember(names)
    return names

