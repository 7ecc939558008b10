"""``binding: {http: {...}}`` — the tool is one HTTP request, declared in YAML.

    build      ``httpspec.parse``: the definition checked and compiled, every problem at its YAML node
    execute    render the request's parts (``run_bounded``: inline, or in a worker thread when the templates
               take long, so the event loop is never held) → send it (retries, redirects checked against the
               allowed hosts) → read at most ``response.max_bytes`` → shape what the LLM reads (select,
               template, max_chars)

Arguments only ever fill values: a path template's output is percent-encoded as one segment (so ``/``,
``..``, ``?``, ``#``, ``@`` and ``%2F`` stay inside it), query and form values are encoded by httpx, and a
header value holding a line break is refused. Every failure becomes a ``ToolError`` the LLM can read.

Secret values, and the credentials the gateway built from them (the token of a ``Basic`` header), are
redacted in every spelling (``gateway.secrets.forms``) from results and errors — from an upstream's error body
before its excerpt is cut, so that no part of one shows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from .. import secrets as secret_store
from ..content.truncation import truncate
from ..context import CallContext
from ..definitions.model import ToolDefinition
from ..errors import ToolError
from ..events import NULL_BUS, Activity, EventBus, current_call
from ..secrets import Hidden
from ..templates.budget import run_bounded
from ..templates.compile import OMIT, Compiled, RenderError, Template
from ..upstream.http import (
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
from . import Bound, BuildEnv, httpauth
from .httpspec import UNSENDABLE_IN_HEADER, HttpBinding, cookie_pairs, parse, text
from .jsonselect import SelectionMissing

MAX_REDIRECTS = 5
ERROR_EXCERPT_BYTES = 4096
ERROR_EXCERPT_CHARS = 300


def build(definition: ToolDefinition, env: BuildEnv) -> Bound:
    binding = parse(definition, env)
    client_factory = env.http_client
    events = env.events

    async def execute(arguments: dict[str, Any], context: CallContext) -> Any:
        deadline = asyncio.get_running_loop().time() + binding.deadline_s
        try:
            values = secret_store.resolve(binding.secrets)
        except secret_store.SecretsMissing as exc:
            raise ToolError(f"Tool '{binding.tool_id}' cannot run: {exc}.") from None
        scope = {"args": arguments, "secrets": values, "context": _context(context)}
        if client_factory is not None:
            return await call(binding, client_factory(), scope, deadline, events, context)
        async with new_client() as client:  # no running gateway (the CLI): a client for this call alone
            return await call(binding, client, scope, deadline, events, context)

    return Bound(executor=execute)


def _context(context: CallContext) -> dict[str, Any]:
    # Unset fields are left out, so that a template using one drops its key like an omitted argument.
    fields = {"conversation_id": context.conversation_id, "user": context.user,
              "tool_call_id": context.tool_call_id}
    return {name: value for name, value in fields.items() if value is not None}


@dataclass
class _Rendered:
    """A request's parts, rendered: what ``build_request`` takes, and the credentials built from secrets."""

    url: httpx.URL
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    credentials: list[tuple[str, str]] = field(default_factory=list)  # (label, value), redacted like secrets


async def call(binding: HttpBinding, client: httpx.AsyncClient, scope: Mapping[str, Any], deadline: float,
               events: EventBus = NULL_BUS, context: CallContext | None = None) -> Any:
    """One call of an HTTP-bound tool with rendered ``scope``, its attempts ending by ``deadline`` (event loop
    time); every failure raises ``ToolError``. Secrets are redacted from the result and from errors. Each request
    sent (each attempt, each redirect hop) is an ``upstream`` activity on ``events``. With ``auth:``, the token
    for the caller of ``context`` goes in Authorization (``httpauth``)."""
    hidden = list(scope["secrets"].items())  # (label, value): the secrets, then credentials built from them
    authorization = None
    if binding.auth is not None:
        authorization, credentials = await httpauth.bearer(binding.tool_id, binding.auth, client,
                                                           context or CallContext())
        hidden += credentials
    try:
        rendered = await run_bounded(lambda: _request(binding, scope), deadline)
        hidden += rendered.credentials
        request = client.build_request(binding.method, rendered.url, headers=rendered.headers, **rendered.options)
        if authorization is not None:
            request.headers["Authorization"] = authorization
        response, body = await _send(binding, client, request, deadline, events)
        value = secret_store.redact_value(_answer(binding, request, response, body, hidden), hidden)
        shape = binding.response
        if shape.template is not None:
            names = {"result": value, "status": response.status_code, "args": scope["args"],
                     "context": scope["context"]}
            value = await run_bounded(lambda: _render(binding, "the response", shape.template, names), deadline)
            if value is OMIT:
                raise _fail(binding, "the response template reads a value that the answer does not have")
            value = secret_store.redact_value(value, hidden)
        elif value is None:
            return f"HTTP {response.status_code} {response.reason_phrase}: the answer is empty (the request succeeded)."
    except ToolError as exc:
        raise ToolError(secret_store.redact(str(exc), hidden)) from None
    return _capped(value, shape.max_chars)


def _fail(binding: HttpBinding, message: str) -> ToolError:
    return ToolError(f"Tool '{binding.tool_id}': {message}")


def _render(binding: HttpBinding, what: str, compiled: Compiled | Template, scope: Mapping[str, Any]) -> Any:
    try:
        return compiled.render(scope)
    except RenderError as exc:
        raise _fail(binding, f"the template for {what} failed: {exc}") from None


def _request(binding: HttpBinding, scope: Mapping[str, Any]) -> _Rendered:
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
    rendered = _Rendered(url)
    for name, compiled in binding.headers:
        value = _render(binding, f"header '{name}'", compiled, scope)
        if value is OMIT or value is None:
            continue
        value = text(value)
        if name.lower() == "cookie":
            value = cookie_pairs(value)
            if not value:
                continue  # every cookie it names was omitted
        if UNSENDABLE_IN_HEADER.search(value):
            raise _fail(binding, f"the value for header '{name}' contains a line break or control character"
                                 f"{_from_arguments(compiled)}, which cannot be sent in an HTTP header")
        rendered.headers.append((name, value.encode("utf-8")))
        if compiled.references.secrets:
            rendered.credentials += _credentials(name, value, compiled.references.secrets)
    options = rendered.options
    # httpx would replace the url's own query string with params rather than add to it.
    params = [*binding.url_query, *_pairs(_render(binding, "the query", binding.query, scope))] if (
        binding.query is not None) else binding.url_query
    if params:
        options["params"] = params
    if binding.body_kind == "json":
        body = _render(binding, "the json body", binding.body, scope)
        if body is not OMIT:
            options["json"] = body
    elif binding.body_kind == "form":
        options["data"] = _grouped(_pairs(_render(binding, "the form body", binding.body, scope)))
    elif binding.body_kind == "text":
        body = _render(binding, "the text body", binding.body, scope)
        options["content"] = "" if body is OMIT else text(body)
        if not any(name.lower() == "content-type" for name, _ in rendered.headers):
            rendered.headers.append(("Content-Type", b"text/plain; charset=utf-8"))
    return rendered


def _from_arguments(compiled: Compiled) -> str:
    """Which arguments a header's value reads, for its error: the model reads the error and fixes those."""
    names = sorted(compiled.references.args)
    listed = ", ".join(repr(name) for name in names)
    return f" (from argument{'s' if len(names) > 1 else ''} {listed})" if names else ""


def _credentials(header: str, value: str, secrets: frozenset[str]) -> list[tuple[str, str]]:
    """A header value built from secrets, to redact as a whole, and its credential without the scheme: the
    base64 token of ``Basic user:secret`` spells the secret differently at each offset."""
    label = f"{', '.join(sorted(secrets))} in {header}"
    scheme, _, token = value.partition(" ")
    found = [(label, value)]
    if token.strip() and scheme.isalpha():
        found.append((label, token.strip()))
    return found


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


async def _send(binding: HttpBinding, client: httpx.AsyncClient, request: httpx.Request, deadline: float,
                events: EventBus) -> tuple[httpx.Response, bytes]:
    """Send with retries (idempotent or declared safe) and backoff, each attempt bounded by the attempt timeout
    and by the time left before ``deadline``; the response is read and closed."""
    clock = asyncio.get_running_loop()
    attempts = 1 + binding.retries
    for attempt in range(1, attempts + 1):
        timeout = max(min(binding.attempt_timeout_s, deadline - clock.time()), 0.001)
        # Redirects httpx builds from this request carry its extensions, so they keep the timeout too.
        request.extensions = {**request.extensions, "timeout": httpx.Timeout(timeout).as_dict()}
        try:
            response, body = await _exchange(binding, client, request, events)
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


async def _exchange(binding: HttpBinding, client: httpx.AsyncClient, request: httpx.Request, events: EventBus
                    ) -> tuple[httpx.Response, bytes]:
    """One attempt: follow the redirects the definition allows, and read the final body (capped). Each request
    is an ``upstream`` activity: "ok" once the service answered (whatever its status), "error" when it did not
    (no connection, a timeout, the answer cut off)."""
    current = request
    for _ in range(MAX_REDIRECTS + 1):
        with events.activity(_upstream(binding, current), failed="error") as hop:
            current.headers.update(hop.headers)  # what observers send on: the tracer's traceparent
            response = await client.send(current, stream=True, follow_redirects=False)
            hop.attributes["status"] = response.status_code
            try:
                following = response.next_request if binding.follow_redirects else None
                if following is None:
                    accepted = _accepted(binding, response.status_code)
                    limit = binding.response.max_bytes if accepted else ERROR_EXCERPT_BYTES
                    try:
                        return response, await read_capped(response, limit, strict=accepted)
                    except TooLarge:
                        hop.outcome = "ok"  # it answered, with more than the tool reads
                        raise _fail(binding, f"{_target(request)}: the answer is larger than "
                                             f"{binding.response.max_bytes} bytes, the most this tool reads; ask "
                                             "for less (filters, paging) if the tool allows it") from None
                hop.outcome = "ok"  # a redirect is a whole answer, even one to a host the tool may not follow
                if not _same_origin(current.url, following.url) and not _home(binding, request, following):
                    for name in binding.secret_headers:  # the secrets are the tool's service's, not another host's
                        following.headers.pop(name, None)
            finally:
                await response.aclose()
        current = following
    raise _fail(binding, f"{_target(request)}: {describe(httpx.TooManyRedirects('too many'), request.url)} "
                         f"(more than {MAX_REDIRECTS})")


def _upstream(binding: HttpBinding, request: httpx.Request) -> Activity:
    """The activity of one request: where it goes, never its path or query (which may hold secrets)."""
    url = request.url
    port = url.port or (443 if url.scheme == "https" else 80)
    return Activity("upstream", {"tool": binding.tool_id, "method": request.method, "scheme": url.scheme,
                                 "host": url.host, "port": port}, parent=current_call.get())


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


def _answer(binding: HttpBinding, request: httpx.Request, response: httpx.Response, body: bytes,
            hidden: Hidden) -> Any:
    """The answer as data (JSON, text, or None when empty), selected; a status not accepted raises."""
    status = response.status_code
    if not _accepted(binding, status):
        raise _fail(binding, _status_message(request, response, body, hidden))
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
            excerpt = _excerpt(body, hidden)
            if _is_json(content_type):  # it said JSON and sent something else: say that, not "got JSON"
                raise _fail(binding, f"{_target(request)}: the answer, typed {content_type}, is not valid JSON: "
                                     f"{excerpt}") from None
            got = f"{content_type or 'no content type'}: {excerpt}"
            raise _fail(binding, f"{_target(request)}: expected JSON, got {got}") from None
    else:
        value = _decode(binding, request, response, body, content_type)
    if shape.select is not None:
        try:
            value = shape.select.select(value)
        except SelectionMissing as exc:
            raise _fail(binding, f"the answer has no '{shape.select.expression}': {exc}") from None
    return value


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


def _status_message(request: httpx.Request, response: httpx.Response, body: bytes,
                    hidden: Hidden) -> str:
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
    excerpt = _excerpt(body, hidden)
    return f"{message}: {excerpt}" if excerpt else message


def _excerpt(body: bytes, hidden: Hidden) -> str:
    """The start of a body, for an error message: secrets redacted first, so the cut never halves one."""
    shown = " ".join(secret_store.redact(body.decode("utf-8", errors="replace"), hidden).split())
    return shown if len(shown) <= ERROR_EXCERPT_CHARS else shown[:ERROR_EXCERPT_CHARS] + "…"


def _capped(value: Any, max_chars: int | None) -> Any:
    if max_chars is None:
        return value
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return value if len(shown) <= max_chars else truncate(shown, max_chars)
