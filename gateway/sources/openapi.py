"""``sources: [{id, openapi: {spec | url, server_url, security}}]`` — the tools of an OpenAPI 3.0 or 3.1 document.

    read      ``spec``: a file inside the definitions directory (YAML through the gateway's bounded loader, JSON
              through ``json``; both within ``max_file_bytes``, YAML within ``max_yaml_nodes``);
              ``url``: fetched with httpx from that URL only (no redirect followed), within the build's wait for
              sources and ``max_file_bytes``. Each good copy is kept on disk (``gateway.sources.cache``); when the
              URL cannot be fetched the last copy is served, marked stale (``/status``, ``tool-gateway list``)
    convert   ``gateway.sources.openapi_operations``: one tool per operation, its input schema, its http binding;
              a document of more operations than ``source_max_tools`` is refused before any is converted (as a
              document past ``max_file_bytes``: an error for a ``spec``, a URL's last copy or none for a ``url``)
    report    problems in the document at its file:line:col (a URL's text has lines too), each message starting
              with the JSON pointer of the node

The outcome is kept per (declaration, document digest): an unchanged document is converted once per process and
yields the same tools, so a reload rebuilds nothing; a URL document is fetched again on every build.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict

import httpx

from ..definitions.model import SourceDeclaration
from ..definitions.paths import real_inside
from ..definitions.yamlsource import YamlDocument, parse_yaml
from ..errors import Problem
from ..upstream.http import describe
from . import cache
from .expansion import Expansion, SourceEnv, UpstreamTool
from .jsonpositions import JsonDocument
from .openapi_operations import Operations, located

FETCH_TIMEOUT_S = 10.0
_KEEP = 32  # converted documents kept (per declaration and digest)
_converted: OrderedDict[tuple[str, str], tuple[tuple[UpstreamTool, ...], tuple[Problem, ...]]] = OrderedDict()
_lock = threading.Lock()


class Unreadable(Exception):
    """The document could not be read (the message says why); a URL's last copy may still be served."""


def unconnected(declaration: SourceDeclaration, env: SourceEnv) -> tuple[Problem, ...] | None:
    """A `url` is fetched, so a draft check does not read it; a `spec` file inside the definitions directory is
    read as usual (None)."""
    return () if "url" in declaration.settings else None


def expand(declaration: SourceDeclaration, env: SourceEnv) -> Expansion:
    settings = declaration.settings
    if ("spec" in settings) == ("url" in settings):
        got = "both" if "spec" in settings else "neither"
        return Expansion(problems=(declaration.problem(["openapi"], f"give `spec` (a file) or `url`, got {got}"),))
    if "spec" in settings:
        try:
            label, data = _read_file(declaration, env)
            tools, problems = convert(declaration, label, data, env, document_url=None)
        except Unreadable as exc:
            return Expansion(problems=(declaration.problem(["openapi", "spec"], str(exc)),),
                             status={"health": "down", "error": str(exc)})
        return Expansion(tools, problems, {"health": "ok", "document": label, "last_refresh": time.time()})
    url = str(settings["url"])
    copy = cache.entry("openapi", url)
    try:
        data = _fetch(url, env)
        tools, problems = convert(declaration, url, data, env, document_url=url)
    except Unreadable as exc:
        kept = cache.load(copy, env.limits.max_file_bytes)
        try:
            if kept is None:
                raise Unreadable("no earlier copy is kept") from None
            tools, problems = convert(declaration, url, kept, env, document_url=url)
        except Unreadable as none:
            return Expansion(problems=(declaration.problem(["openapi", "url"], f"{exc}; {none}, so it serves no "
                                                           "tools until the URL answers", severity="warning"),),
                             status={"health": "down", "stale": False, "error": str(exc), "document": url})
        return Expansion(tools, problems, {"health": "stale", "stale": True, "error": str(exc), "document": url,
                                           "last_refresh": os.stat(copy).st_mtime})
    if tools:  # a copy worth serving when the URL is down later
        try:
            cache.save(copy, data)
        except OSError as exc:
            problems += (declaration.problem(["openapi", "url"], f"cannot keep a copy of the document in "
                                                                 f"{copy.parent}: {exc}", severity="warning"),)
    return Expansion(tools, problems, {"health": "ok", "document": url, "last_refresh": time.time()})


def _read_file(declaration: SourceDeclaration, env: SourceEnv) -> tuple[str, bytes]:
    spec = str(declaration.settings["spec"])
    path = env.root / spec
    if real_inside(path, os.path.realpath(env.root)) is None:
        raise Unreadable(f"spec '{spec}' is not inside the definitions directory")
    try:
        size = path.stat().st_size
        if size > env.limits.max_file_bytes:
            raise Unreadable(f"spec '{spec}' is {size:,} bytes, more than max_file_bytes "
                             f"({env.limits.max_file_bytes:,})")
        return os.path.normpath(spec), path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read spec '{spec}': {exc.strerror}") from None


def _fetch(url: str, env: SourceEnv) -> bytes:
    timeout = min(FETCH_TIMEOUT_S, env.remaining())
    limit = env.limits.max_file_bytes
    try:
        with httpx.Client(follow_redirects=False, timeout=timeout) as client, client.stream("GET", url) as response:
            if response.status_code != 200:
                where = response.headers.get("location")
                moved = f" (redirected to {where}: give that URL)" if where else ""
                raise Unreadable(f"fetching {url} answered HTTP {response.status_code}{moved}")
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise Unreadable(f"the document at {url} is larger than max_file_bytes ({limit:,})")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as exc:
        raise Unreadable(f"fetching {url}: {describe(exc, httpx.URL(url), timeout)}") from None
    except httpx.InvalidURL as exc:
        raise Unreadable(f"invalid url {url!r}: {exc}") from None


def convert(declaration: SourceDeclaration, label: str, data: bytes, env: SourceEnv, *,
            document_url: str | None) -> tuple[tuple[UpstreamTool, ...], tuple[Problem, ...]]:
    """The tools of the document ``data`` (named ``label`` in problems), kept per declaration and digest;
    ``Unreadable`` when it declares more operations than ``source_max_tools``."""
    key = (json.dumps(declaration.raw, sort_keys=True, default=str), hashlib.sha256(data).hexdigest())
    with _lock:
        if key in _converted:
            _converted.move_to_end(key)
            return _converted[key]
    outcome = _convert(declaration, label, data, env, document_url)
    with _lock:
        _converted[key] = outcome
        while len(_converted) > _KEEP:
            _converted.popitem(last=False)
    return outcome


def _convert(declaration: SourceDeclaration, label: str, data: bytes, env: SourceEnv,
             document_url: str | None) -> tuple[tuple[UpstreamTool, ...], tuple[Problem, ...]]:
    document, problems = parse_document(label, data, env)
    if document is None:
        return (), tuple(problems)
    version = str(document.data.get("openapi", document.data.get("swagger", "")))
    if not version.startswith(("3.0", "3.1")):
        problems.append(document.problem(["openapi"] if "openapi" in document.data else [],
                                         f"OpenAPI version {version or '(none)'!r} is not supported: 3.0 and 3.1 are "
                                         "(convert Swagger 2.0 documents first)"))
        return (), tuple(problems)
    settings = declaration.settings
    operations = Operations(document.data, security=settings.get("security") or {},
                            server_url=settings.get("server_url"), document_url=document_url, auth=settings.get("auth"))
    bound = env.settings.source_max_tools
    if (count := operations.count()) > bound:  # refused before converting: 100,000 operations took 30 s and 500 MB
        raise Unreadable(f"{label} declares {count:,} operations, more than {bound:,}, the bound of setting "
                         "source_max_tools: raise it to serve this source")
    tools = operations.tools()
    problems += located(document, operations.problems, label)
    for scheme, count in sorted(operations.security.unsatisfied.items()):
        problems.append(declaration.problem(["openapi"], f"{count} operation(s) need security scheme '{scheme}': "
                                                         f"give its value in `security: {{{scheme}: ...}}` (they "
                                                         "are called without it)", key=True, severity="warning"))
    return tuple(tools), tuple(problems)


def parse_document(label: str, data: bytes, env: SourceEnv) -> tuple[YamlDocument | None, list[Problem]]:
    """The document as data with positions (JSON through ``json``, else the bounded YAML loader)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [Problem(label, 1, 1, f"not UTF-8: {exc}")]
    if text.lstrip().startswith("{"):
        try:
            document: YamlDocument = JsonDocument(label, text, json.loads(text))
            problems: list[Problem] = []
        except (ValueError, RecursionError) as exc:
            line, column = (exc.lineno, exc.colno) if isinstance(exc, json.JSONDecodeError) else (1, 1)
            return None, [Problem(label, line, column, f"invalid JSON: {exc}")]
    else:
        parsed, problems = parse_yaml(label, text, env.limits)
        if parsed is None:
            return None, problems
        # Keys as JSON has them (YAML allows `200:` or `true:` as keys): the conversion reads strings only.
        parsed.data = json.loads(json.dumps(parsed.data))
        document = parsed
    if not isinstance(document.data, dict):
        return None, [*problems, Problem(label, 1, 1, "an OpenAPI document is a mapping at its top")]
    return document, problems
