"""The ``sources:`` framework: each source's kind expands it (``gateway.sources.expansion``), then the same rules
for every kind (``gateway.sources.rules``) turn what the upstream offers into tool definitions.

    expand     every source's kind at once, each in a daemon thread, waited for until one deadline; a kind that
               does not return in time (or raises) leaves the last expansion this process had for the same
               declaration in place, marked stale, or no tools and a warning: a down upstream never blocks a build
               (the kind hears of an expansion that comes after all: ``late``).
               A build that may not connect (a draft check) expands only what reaches nothing outside; an upstream
               is checked as declared, with the tools this process last listed for the same upstream settings
    generate   select, name, override, defaults, hide (``gateway.sources.rules``)

The definitions generated from a declaration and an expansion's ``tools`` are kept (weakly, by the declaration,
which the loader returns unchanged for an unchanged file; and by the identity of the tools tuple, which a kind
returns again when nothing changed upstream), so a reload with nothing new upstream rebuilds nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from .. import daemon
from ..definitions.model import SourceDeclaration, ToolDefinition
from ..errors import Problem
from .expansion import SOURCE_KINDS, Expansion, SourceEnv, UpstreamTool
from .rules import Generated, declaration_key, generate, is_live

_KEEP_LAST = 256  # expansions remembered for a source whose kind later fails or runs late


@dataclass(frozen=True, eq=False)
class SourceTools:
    """Every source's tools, ready to combine with the hand-written ones, and what ``/status`` shows of them."""

    tools: tuple[ToolDefinition, ...]
    problems: tuple[Problem, ...]
    status: tuple[Mapping[str, Any], ...]
    digest: str  # of every generated definition and each source's freshness: part of the catalog's version
    live: frozenset[str] = frozenset()  # ids of the sources whose tools someone other than the admin lists


# The last expansion per declaration content, for a kind that fails or runs late; shared by a process's builds
# (an abandoned build may still write here: a lock, and only whole values).
_last: OrderedDict[str, Expansion] = OrderedDict()
_last_lock = threading.Lock()
# The last expansion per upstream (a kind and its settings, whatever selects and renames its tools): what a draft
# check shows of an upstream it may not connect to. Under _last_lock, bounded as _last.
_last_upstream: OrderedDict[str, Expansion] = OrderedDict()
# declaration -> (the expansion's tools, definitions generated from the pair)
_generated: weakref.WeakKeyDictionary[SourceDeclaration, tuple[tuple[UpstreamTool, ...], Generated]] = (
    weakref.WeakKeyDictionary())


def expand_sources(sources: Sequence[SourceDeclaration], env: SourceEnv) -> SourceTools:
    """Expand every source (concurrently, until ``env.deadline``) and generate its tool definitions."""
    if not sources:
        return SourceTools((), (), (), "")
    unconnected = {} if env.connect else {id(source): problems for source in sources
                                          if (problems := _unconnected(source, env)) is not None}
    started = {id(source): daemon.start(lambda s=source: _expand(s, env), f"source {source.id}")
               for source in sources if id(source) not in unconnected}
    tools: list[ToolDefinition] = []
    problems: list[Problem] = []
    status: list[Mapping[str, Any]] = []
    digest = hashlib.sha256()
    for source in sources:
        expansion = (_outcome(source, started[id(source)], env) if id(source) in started
                     else _last_listed(source, unconnected[id(source)]))
        try:
            generated = _generate_once(source, expansion)
        except Exception as exc:  # noqa: BLE001 — a bug met on what one upstream offers fails that source, not the build
            failed = source.problem([source.kind], f"generating its tools failed: {type(exc).__name__}: {exc}",
                                    severity="warning" if is_live(source) else "error")
            generated = Generated((), (failed,), "failed")
        tools += generated.tools
        problems += expansion.problems
        problems += generated.problems
        status.append(_status(source, expansion, generated))
        # Freshness is part of the version: a source turning stale (or fresh again) is a new catalog, seen on /status.
        digest.update(f"{source.id}\0{generated.digest}\0{expansion.status.get('stale')}\0"
                      f"{expansion.status.get('error')}\0".encode())
    return SourceTools(tuple(tools), tuple(problems), tuple(status), digest.hexdigest(),
                       frozenset(source.id for source in sources if is_live(source)))


def _upstream_key(source: SourceDeclaration) -> str:
    return json.dumps([source.kind, source.settings], sort_keys=True, default=str)


def _remember(table: OrderedDict[str, Expansion], key: str, expansion: Expansion) -> None:
    table[key] = expansion
    table.move_to_end(key)
    while len(table) > _KEEP_LAST:
        table.popitem(last=False)


def _unconnected(source: SourceDeclaration, env: SourceEnv) -> tuple[Problem, ...] | None:
    """For a build that may not connect: the declaration's problems found without connecting, or None when its
    kind reaches nothing outside the definitions directory (it is expanded as usual)."""
    module = SOURCE_KINDS.get(source.kind)
    check = getattr(import_module(module), "unconnected", None) if module else None
    return check(source, env) if check is not None else None


def _last_listed(source: SourceDeclaration, problems: tuple[Problem, ...]) -> Expansion:
    """A source a draft check may not connect to: its declaration's problems and, when it has none, the tools this
    process last listed for the same upstream settings (the served catalog's), or none and a warning."""
    if problems:
        return Expansion(problems=problems, status={"health": "unchecked", "stale": False,
                                                    "error": "its declaration has problems"})
    with _last_lock:
        last = _last_upstream.get(_upstream_key(source))
    if last is not None:
        return last
    error = ("not read by a check, which never starts an upstream's process or fetches its document: it is read "
             "when the file is saved and the catalog reloads")
    return Expansion(problems=(source.problem([source.kind], error, key=True, severity="warning"),),
                     status={"health": "unchecked", "stale": False, "error": error})


def _expand(source: SourceDeclaration, env: SourceEnv) -> Expansion:
    module = SOURCE_KINDS.get(source.kind)
    if module is None:  # the schema names the kinds; a kind in the schema but not here is a bug
        return Expansion(problems=(source.problem([source.kind], f"unknown source kind '{source.kind}'", key=True),))
    expansion = import_module(module).expand(source, env)
    with _last_lock:
        _remember(_last, declaration_key(source), expansion)
        _remember(_last_upstream, _upstream_key(source), expansion)
    return expansion


def _outcome(source: SourceDeclaration, future: Any, env: SourceEnv) -> Expansion:
    """The kind's expansion, or (it failed or is late) the last one known, stale, or none."""
    try:
        return future.result(max(env.deadline - time.monotonic(), 0))
    except TimeoutError:
        error = f"the upstream was not read within {env.wait_s:g} s"
        future.add_done_callback(lambda done: _late(source, done, env))  # at once if it is done by now
    except Exception as exc:  # noqa: BLE001 — a kind's bug or an unexpected failure: this source's problem, not the build's
        error = f"reading the upstream failed: {type(exc).__name__}: {exc}"
    with _last_lock:
        last = _last.get(declaration_key(source))
    if last is not None:
        return Expansion(last.tools, last.problems, {**last.status, "health": "stale", "stale": True, "error": error})
    return Expansion(problems=(source.problem([source.kind], f"{error}; it serves no tools until it is read",
                                              key=True, severity="warning"),),
                     status={"health": "down", "stale": False, "error": error})


def _late(source: SourceDeclaration, done: Any, env: SourceEnv) -> None:
    """The kind's expansion, come after the build stopped waiting for it: the kind hears of it (``late``, where it
    has one), since what it read was served by no build."""
    module = SOURCE_KINDS.get(source.kind)
    late = getattr(import_module(module), "late", None) if module else None
    if late is not None and not done.cancelled() and done.exception() is None:  # exception() raises if cancelled
        late(source, done.result(), env)


def _generate_once(source: SourceDeclaration, expansion: Expansion) -> Generated:
    before = _generated.get(source)
    if before is not None and before[0] is expansion.tools:
        return before[1]
    generated = generate(source, expansion, before[1] if before else None)
    _generated[source] = (expansion.tools, generated)
    return generated


def _status(source: SourceDeclaration, expansion: Expansion, generated: Generated) -> dict[str, Any]:
    kind_status = dict(expansion.status)
    stale = bool(kind_status.get("stale", False))
    return {"id": source.id, "kind": source.kind, "file": source.file, "tools": len(generated.tools),
            **kind_status, "health": kind_status.get("health", "stale" if stale else "ok"), "stale": stale,
            "error": kind_status.get("error"), "last_refresh": kind_status.get("last_refresh")}
