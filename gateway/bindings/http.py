"""``binding: {http: {...}}`` — the tool is one HTTP request, declared in YAML.

    build      parse the URL (scheme, host and port are fixed here), compile every template, check that each
               argument a template reads is in the input schema, compile the response selector; report every
               problem at its YAML node; warn about secrets missing from the environment
    execute    render the request → send it (retries, redirects checked against the allowed hosts)
               → read at most ``response.max_bytes`` → shape what the LLM reads (select, template, max_chars)

Arguments only ever fill values: a path template's output is percent-encoded as one segment (so ``/``,
``..``, ``?``, ``#``, ``@`` and ``%2F`` stay inside it), query and form values are encoded by httpx, and a
header value holding a line break is refused. Every failure becomes a ``ToolError`` the LLM can read, with
secret values redacted from it (and from results).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from .. import secrets as secret_store
from ..context import CallContext
from ..definitions import ToolDefinition
from ..errors import Problem, ToolError
from ..invoke import TRUNCATION_MARK
from ..jsonselect import SelectionMissing, Selector, SelectorInvalid, compile_selector
from ..templates import (
    OMIT,
    Compiled,
    RenderError,
    Template,
    TemplateInvalid,
    compile_template,
    compile_value,
    environment,
    is_template,
)
from ..upstream import (
    RETRY_STATUSES,
    TRANSIENT,
    UPSTREAM_EXCEPTIONS,
    TooLarge,
    backoff,
    describe,
    new_client,
    read_capped,
    retry_after,
)
from . import BindingProblems, Bound, BuildEnv

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 1_048_576
ERROR_EXCERPT_BYTES = 4096
ERROR_EXCERPT_CHARS = 300
RESPONSE_NAMES = frozenset({"result", "status", "args", "context"})
# Set by the gateway from `url` and the body; a template (or an argument) must not be able to change them.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_URL = re.compile(r"^(?P<scheme>https?)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?P<query>\?[^#]*)?(?P<fragment>#.*)?$",
                  re.IGNORECASE | re.DOTALL)
_UNSENDABLE_IN_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _segment(value: Any) -> str:
    """A path template's output as one path segment: everything but unreserved characters percent-encoded."""
    encoded = quote(text(value), safe="")
    # A segment of dots would be read as "this" or "parent" directory by the URL parser or the server.
    return encoded.replace(".", "%2E") if set(encoded) <= {"."} else encoded


PATH_ENV = environment(finalize=_segment)


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


def build(definition: ToolDefinition, env: BuildEnv) -> Bound:
    binding = _parse(definition, env)
    client_factory = env.http_client

    async def execute(arguments: dict[str, Any], context: CallContext) -> Any:
        deadline = asyncio.get_running_loop().time() + binding.deadline_s
        try:
            values = secret_store.resolve(binding.secrets)
        except secret_store.SecretsMissing as exc:
            raise ToolError(f"Tool '{binding.tool_id}' cannot run: {exc}.") from None
        scope = {"args": arguments, "secrets": values, "context": _context(context)}
        try:
            if client_factory is not None:
                result = await call(binding, client_factory(), scope, deadline)
            else:  # no running gateway (the CLI): a client for this call alone
                async with new_client() as client:
                    result = await call(binding, client, scope, deadline)
        except ToolError as exc:
            raise ToolError(secret_store.redact(str(exc), values)) from None
        return secret_store.redact_value(result, values)

    return Bound(executor=execute)


def _context(context: CallContext) -> dict[str, Any]:
    # Unset fields are left out, so that a template using one drops its key like an omitted argument.
    fields = {"conversation_id": context.conversation_id, "user": context.user,
              "tool_call_id": context.tool_call_id}
    return {name: value for name, value in fields.items() if value is not None}


# ---------------------------------------------------------------- build: from YAML to a checked HttpBinding


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


def _parse(definition: ToolDefinition, env: BuildEnv) -> HttpBinding:
    spec = definition.binding["http"]
    problems = _Problems(definition)
    method = spec.get("method", "GET")
    origin, path_source, url_query = _parse_url(spec["url"], problems)
    path = problems.compile(("url",), path_source or "/", env=PATH_ENV, typed=False)
    query = problems.compile(("query",), spec["query"]) if "query" in spec else None
    headers = _headers(spec.get("headers", {}), problems)
    body_kind = next((kind for kind in ("json", "form", "text") if kind in spec), None)
    body = problems.compile((body_kind,), spec[body_kind], typed=body_kind != "text") if body_kind else None
    response = _response(spec.get("response", {}), problems)

    for part in ("query", "form", "headers", "json"):
        _check_keys(spec.get(part), (part,), problems)
    request_parts = [("url", path), ("query", query), (body_kind, body)]
    request_parts += [(("headers", name), compiled) for name, compiled in headers]
    _check_arguments(definition, [*request_parts, (("response", "template"), response.template)], problems)
    secret_names = _secrets(definition, request_parts, env)

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
        if name.lower() in RESERVED_HEADERS:
            problems.add(("headers", name), f"header '{name}' is set by the gateway (from the url and the "
                                            "body) and cannot be declared", key=True)
            continue
        if isinstance(value, str) and _UNSENDABLE_IN_HEADER.search(value.strip("\n")):
            problems.add(("headers", name), f"header '{name}' holds a line break or control character")
            continue
        compiled = problems.compile(("headers", name), value.strip("\n") if isinstance(value, str) else value)
        if compiled is not None:
            headers.append((name, compiled))
    return headers


def _check_keys(value: Any, where: tuple[str | int, ...], problems: _Problems) -> None:
    """Keys (parameter, header and JSON member names) are sent as written: a template there is a mistake."""
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


def _secrets(definition: ToolDefinition, parts: list, env: BuildEnv) -> set[str]:
    names: set[str] = set()
    for where, template in _located(parts):
        names |= template.references.secrets
        for name in secret_store.missing(template.references.secrets):
            env.warnings.append(definition.problem(
                ["binding", "http", *where],
                f"secret '{name}' is not set in the environment: calls of '{definition.id}' fail until it is",
                severity="warning"))
    secret_store.remember(names)
    return names


# ---------------------------------------------------------------- execute: render, send, shape


async def call(binding: HttpBinding, client: httpx.AsyncClient, scope: Mapping[str, Any], deadline: float) -> Any:
    """One call of an HTTP-bound tool with rendered ``scope``, its attempts ending by ``deadline`` (event loop
    time); every failure raises ``ToolError``."""
    request = _request(binding, client, scope)
    response, body = await _send(binding, client, request, deadline)
    return _shape(binding, request, response, body, scope)


def _fail(binding: HttpBinding, message: str) -> ToolError:
    return ToolError(f"Tool '{binding.tool_id}': {message}")


def _render(binding: HttpBinding, what: str, compiled: Compiled | Template, scope: Mapping[str, Any]) -> Any:
    try:
        return compiled.render(scope)
    except RenderError as exc:
        raise _fail(binding, f"the template for {what} failed: {exc}") from None


def _request(binding: HttpBinding, client: httpx.AsyncClient, scope: Mapping[str, Any]) -> httpx.Request:
    path = _render(binding, "the url", binding.path, scope)
    if path is OMIT:
        needed = sorted(binding.path.references.args - set(scope["args"]))
        raise _fail(binding, f"the url needs argument(s) {', '.join(needed) or 'that were not given'}")
    try:
        url = httpx.URL(f"{binding.origin_text}{path}")
    except httpx.InvalidURL as exc:
        raise _fail(binding, f"the url is invalid: {exc}") from None
    # Defence in depth: percent-encoding already keeps arguments inside the path.
    if not _same_origin(url, binding.origin):
        raise _fail(binding, "the rendered url would change the fixed scheme, host or port")
    headers = []
    for name, compiled in binding.headers:
        value = _render(binding, f"header '{name}'", compiled, scope)
        if value is OMIT or value is None:
            continue
        value = text(value)
        if _UNSENDABLE_IN_HEADER.search(value):
            raise _fail(binding, f"the value for header '{name}' contains a line break or control character, "
                                 "which cannot be sent in an HTTP header")
        headers.append((name, value.encode("utf-8")))
    options: dict[str, Any] = {}
    # httpx would replace the url's own query string with params rather than add to it.
    params = [*binding.url_query, *_pairs(_render(binding, "the query", binding.query, scope))] if (
        binding.query is not None) else binding.url_query
    if params:
        options["params"] = params
    if binding.body_kind == "json":
        rendered = _render(binding, "the json body", binding.body, scope)
        if rendered is not OMIT:
            options["json"] = rendered
    elif binding.body_kind == "form":
        options["data"] = _grouped(_pairs(_render(binding, "the form body", binding.body, scope)))
    elif binding.body_kind == "text":
        rendered = _render(binding, "the text body", binding.body, scope)
        options["content"] = "" if rendered is OMIT else text(rendered)
        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", b"text/plain; charset=utf-8"))
    return client.build_request(binding.method, url, headers=headers, **options)


def _pairs(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query or form parameters: a list repeats its key, null (like an omitted argument) drops it."""
    pairs = []
    for key, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                pairs.append((key, text(item)))
    return pairs


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    form: dict[str, list[str]] = {}
    for key, value in pairs:
        form.setdefault(key, []).append(value)
    return form


async def _send(binding: HttpBinding, client: httpx.AsyncClient, request: httpx.Request, deadline: float
                ) -> tuple[httpx.Response, bytes]:
    """Send with retries (idempotent or declared safe) and backoff, each attempt bounded by the attempt timeout
    and by the time left before ``deadline``; the response is read and closed."""
    clock = asyncio.get_running_loop()
    attempts = 1 + binding.retries
    for attempt in range(1, attempts + 1):
        timeout = max(min(binding.attempt_timeout_s, deadline - clock.time()), 0.001)
        # Redirects httpx builds from this request carry its extensions, so they keep the timeout too.
        request.extensions = {**request.extensions, "timeout": httpx.Timeout(timeout).as_dict()}
        try:
            response, body = await _exchange(binding, client, request)
        except UPSTREAM_EXCEPTIONS as exc:
            wait = backoff(attempt)
            if attempt == attempts or not isinstance(exc, TRANSIENT) or not _fits(wait, deadline, clock):
                message = describe(exc, request.url, timeout)
                raise _fail(binding, f"{_target(request)}: {message}") from None
            await asyncio.sleep(wait)
            continue
        if response.status_code not in RETRY_STATUSES or _accepted(binding, response.status_code):
            return response, body
        asked = retry_after(response.headers)
        wait = asked if asked is not None else backoff(attempt)
        if attempt == attempts or not _fits(wait, deadline, clock):
            return response, body  # the failure it answered is the result
        await asyncio.sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _fits(wait: float, deadline: float, clock: asyncio.AbstractEventLoop) -> bool:
    """Whether another attempt can still start after ``wait`` and have some time before the deadline."""
    return clock.time() + wait < deadline


async def _exchange(binding: HttpBinding, client: httpx.AsyncClient, request: httpx.Request
                    ) -> tuple[httpx.Response, bytes]:
    """One attempt: follow the redirects the definition allows, and read the final body (capped)."""
    current = request
    for _ in range(MAX_REDIRECTS + 1):
        response = await client.send(current, stream=True, follow_redirects=False)
        try:
            following = response.next_request if binding.follow_redirects else None
            if following is None:
                accepted = _accepted(binding, response.status_code)
                limit = binding.response.max_bytes if accepted else ERROR_EXCERPT_BYTES
                try:
                    return response, await read_capped(response, limit, strict=accepted)
                except TooLarge:
                    raise _fail(binding, f"{_target(request)}: the answer is larger than "
                                         f"{binding.response.max_bytes} bytes, the most this tool reads; ask "
                                         "for less (filters, paging) if the tool allows it") from None
            if not _same_origin(current.url, following.url) and not _home(binding, request, following):
                for name in binding.secret_headers:  # the secrets are the tool's service's, not another host's
                    following.headers.pop(name, None)
        finally:
            await response.aclose()
        current = following
    raise _fail(binding, f"{_target(request)}: {describe(httpx.TooManyRedirects('too many'), request.url)} "
                         f"(more than {MAX_REDIRECTS})")


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def _home(binding: HttpBinding, request: httpx.Request, following: httpx.Request) -> bool:
    """Whether a redirect stays with the tool's service (its origin, or that host upgraded from http to https
    on the default port), else whether it goes to an allowed host; any other target raises ``ToolError``."""
    target = following.url
    home = _same_origin(target, binding.origin)
    upgrade = (target.host == binding.origin.host and request.url.scheme == "http"
               and target.scheme == "https" and target.port is None)
    if home or upgrade:
        return True
    if target.scheme in ("http", "https") and target.host.lower() in binding.allow_redirect_hosts:
        return False
    raise _fail(binding, f"{_target(request)}: the service redirected to another host "
                         f"({target.scheme}://{target.netloc.decode('ascii', 'replace')}), which this tool "
                         "does not follow (the definition's allow_redirect_hosts does not list it)")


def _accepted(binding: HttpBinding, status: int) -> bool:
    if binding.accept_status is not None:
        return status in binding.accept_status
    return 200 <= status < 300


def _target(request: httpx.Request) -> str:
    """``GET http://host:port/path``, without the query string (which may hold what must not be repeated)."""
    url = request.url
    return f"{request.method} {url.copy_with(query=None, fragment=None)}"


def _shape(binding: HttpBinding, request: httpx.Request, response: httpx.Response, body: bytes,
           scope: Mapping[str, Any]) -> Any:
    status = response.status_code
    if not _accepted(binding, status):
        raise _fail(binding, _status_message(request, response, body))
    shape = binding.response
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not body:
        value: Any = None
        if shape.select is not None:
            raise _fail(binding, f"{_target(request)}: the answer (HTTP {status}) is empty, so "
                                 f"'{shape.select.expression}' selects nothing")
    elif shape.expect == "json" or shape.select or (shape.expect == "auto" and _is_json(content_type)):
        try:
            value = json.loads(body)
        except ValueError:
            got = f"{content_type or 'no content type'}: {_excerpt(body)}"
            raise _fail(binding, f"{_target(request)}: expected JSON, got {got}") from None
    else:
        value = _decode(binding, request, response, body, content_type)
    if shape.select is not None:
        try:
            value = shape.select.select(value)
        except SelectionMissing as exc:
            raise _fail(binding, f"the answer has no '{shape.select.expression}': {exc}") from None
    if shape.template is not None:
        names = {"result": value, "status": status, "args": scope["args"], "context": scope["context"]}
        rendered = _render(binding, "the response", shape.template, names)
        if rendered is OMIT:
            raise _fail(binding, "the response template reads a value that the answer does not have")
        value = rendered
    elif value is None:
        return f"HTTP {status} {response.reason_phrase}: the answer is empty (the request succeeded)."
    return _capped(value, shape.max_chars)


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def _decode(binding: HttpBinding, request: httpx.Request, response: httpx.Response, body: bytes,
            content_type: str) -> str:
    try:
        return body.decode(response.charset_encoding or "utf-8")
    except (UnicodeDecodeError, LookupError):
        if content_type.startswith("text/"):
            return body.decode("utf-8", errors="replace")
    raise _fail(binding, f"{_target(request)}: the answer is binary ({content_type or 'no content type'}, "
                         f"{len(body)} bytes), which this tool cannot show")


def _status_message(request: httpx.Request, response: httpx.Response, body: bytes) -> str:
    status = response.status_code
    message = f"{_target(request)}: the service answered HTTP {status} {response.reason_phrase}"
    if response.is_redirect:
        message += f", a redirect to {response.headers.get('location', '?')}, which this tool does not follow"
    elif status == 429:
        message += " (rate limited; try again later)"
    elif 400 <= status < 500:
        message += " (check the arguments)"
    elif status >= 500:
        message += " (the service failed; retrying later may help)"
    excerpt = _excerpt(body)
    return f"{message}: {excerpt}" if excerpt else message


def _excerpt(body: bytes) -> str:
    shown = " ".join(body.decode("utf-8", errors="replace").split())
    return shown if len(shown) <= ERROR_EXCERPT_CHARS else shown[:ERROR_EXCERPT_CHARS] + "…"


def _capped(value: Any, max_chars: int | None) -> Any:
    if max_chars is None:
        return value
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(shown) <= max_chars:
        return value
    return shown[:max_chars] + TRUNCATION_MARK.format(omitted=len(shown) - max_chars)
