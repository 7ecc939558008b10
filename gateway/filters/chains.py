"""Invocation filters: admin code wrapped around tool calls, like Semantic Kernel's
``OnFunctionInvocationAsync(context, next)`` and Starlette's middleware.

A filter is a callable ``filter(call, next)``. ``call`` is a ``FilterCall`` (the tool, the arguments it may
change, the call context, the side and surface); ``await next()`` runs the rest of the onion (the filters inside
it, then the tool) and returns its ``ToolResult`` — an error result rather than an exception when the tool
failed. A filter returns a ``ToolResult`` (``next``'s, or one changed with ``dataclasses.replace``), or any other
value, which then stands for the tool's return value (normalised, checked against the output schema); it may
raise ``ToolError`` to answer with an error without calling the tool. Async filters are awaited on the event
loop; sync ones run in a thread of their own, where ``next()`` blocks until the rest of the call is done. Python
cannot stop such a thread, so sync filters run as sync tools do (``gateway.bindings.workers``): each filter of a
tool's chain holds at most ``max_concurrent_calls_per_tool`` threads for that tool — a hung one refuses its
tool's further calls (they end as the timeout error) and leaves every other tool's filters their threads.

Declared in YAML (settings ``filters``, a tool's ``filters:``) as ``module:function`` — trusted like a Python
binding: from ``<definitions>/python/`` or an allowed package — or ``{use: module:function, with: {...}}``,
whose ``with`` entries are passed to the function as keyword arguments. A bare name is a built-in
(``gateway.filters.builtin``), whose ``with`` is checked by the built-in. Everything is resolved and checked when
the catalog is built; a call then only runs them. Order: settings filters outermost, then toolset filters, then
the tool's own, each list in its written order (the first listed is the outermost).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..bindings import BuildEnv
from ..bindings.python import trusted_function
from ..bindings.workers import FILTER_POOL, call_sync
from ..errors import Problem
from .builtin import BUILTINS
from .call import Filter, FilterCall, FilterProblem, Next

if TYPE_CHECKING:
    from ..definitions.model import ToolDefinition

SPEC = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
BUILTIN = re.compile(r"^[a-z][a-z0-9_]*$")
SETTINGS_FILE = "<settings>"  # where problems of the settings' filters point (they have no YAML position)


def as_async(function: Callable[..., Any], config: Mapping[str, Any], place: tuple[Any, ...], limit: int
             ) -> Callable[[FilterCall, Next], Awaitable[Any]]:
    """The function as an async ``run(call, next)``; its ``with`` values bound as keywords.

    A sync function runs under ``limit`` slots per tool and ``place`` (the definitions directory and where in the
    chain the filter is declared): one per place, as a sync filter holds its slot while the filters inside it
    run, so a filter listed twice in a chain must not wait for itself. Declared places, not filter objects, so
    that a rebuilt catalog keeps counting the threads its previous build's filters left running.
    """
    bound = partial(function, **config) if config else function
    if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__):
        return bound

    async def run_in_thread(call: FilterCall, next: Next) -> Any:
        loop = asyncio.get_running_loop()
        begun: list[concurrent.futures.Future[Any]] = []

        def next_blocking(given: FilterCall | None = None) -> Any:
            future = asyncio.run_coroutine_threadsafe(next(given), loop)
            begun.append(future)
            return future.result()

        try:
            return await call_sync((*place, call.tool_id), limit, partial(bound, call, next_blocking), {}, FILTER_POOL)
        except asyncio.CancelledError:
            for future in begun:  # the rest of the call ends with this one; the thread's next() then raises
                future.cancel()
            raise

    return run_in_thread


def resolve(spec: Any, env: BuildEnv, place: tuple[Any, ...]) -> Filter:
    """One spec as written in YAML, declared at ``place`` (which list, which item), resolved and checked; raises
    ``FilterProblem``."""
    use, config, where = _shape(spec)
    if SPEC.match(use):
        function = _trusted_function(use, env, where)
        _check_signature(use, function, config)
        return Filter(use, as_async(function, config, (env.root, *place), env.settings.max_concurrent_calls_per_tool))
    make = BUILTINS.get(use)
    if make is None:
        raise FilterProblem(f"unknown filter {use!r}: give module:function, or a built-in "
                            f"({', '.join(sorted(BUILTINS))})", where)
    return Filter(use, make(config))


def _shape(spec: Any) -> tuple[str, dict[str, Any], list[str | int]]:
    """(use, with, path of ``use``) of a spec: a string, or a mapping of ``use`` and optional ``with``."""
    if isinstance(spec, str):
        use, config, where = spec, {}, []
    elif isinstance(spec, Mapping):
        unknown = sorted(set(map(str, spec)) - {"use", "with"})
        if unknown:
            raise FilterProblem(f"unknown key {unknown[0]!r} in a filter (allowed: use, with)", [unknown[0]])
        use, config, where = spec.get("use"), spec.get("with") or {}, ["use"]
        if not isinstance(config, Mapping):
            raise FilterProblem(f"a filter's 'with' must be a mapping, got {type(config).__name__}", ["with"])
        if not isinstance(use, str):
            raise FilterProblem("a filter mapping needs 'use': module:function or a built-in's name", [])
        config = {str(key): value for key, value in config.items()}
    else:
        raise FilterProblem(f"a filter is module:function, a built-in's name or {{use, with}}, "
                            f"got {type(spec).__name__}")
    if not (SPEC.match(use) or BUILTIN.match(use)):
        raise FilterProblem(f"invalid filter {use!r}: give module:function or a built-in's name", where)
    return use, config, where


def _trusted_function(target: str, env: BuildEnv, where: list[str | int]) -> Callable[..., Any]:
    """The function ``module:function`` names, under the python binding's trust rule."""
    function = trusted_function(target, env)
    if isinstance(function, str):
        raise FilterProblem(function, where)
    return function


def _check_signature(target: str, function: Callable[..., Any], config: Mapping[str, Any]) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # a builtin without a signature: its first call says what is wrong
    try:
        signature.bind(None, None, **config)
    except TypeError as exc:
        accepted = list(signature.parameters)[2:]
        detail = f" (it takes: {', '.join(accepted)})" if accepted else ""
        raise FilterProblem(f"filter '{target}' must take (call, next) and the keys of 'with': {exc}{detail}",
                            ["with"] if config else []) from None


@dataclass(frozen=True)
class FilterChains:
    """Every tool's filters, outermost first: what a catalog keeps and ``invoke`` runs."""

    by_tool: Mapping[str, tuple[Filter, ...]]

    def of(self, tool_id: str) -> tuple[Filter, ...]:
        return self.by_tool.get(tool_id, ())


@dataclass(frozen=True)
class SharedFilters:
    """The settings' filters and each toolset's, resolved once per build: the parts of chains that no one tool's
    definition decides."""

    outer: tuple[Filter, ...]
    by_toolset: Mapping[str, tuple[Filter, ...]]

    def chain(self, definition: ToolDefinition, env: BuildEnv, problems: list[Problem]) -> tuple[Filter, ...]:
        """The tool's chain, outermost first; its own filters' problems are added to ``problems``."""
        own = definition.filters
        inner = _resolve_all(own, env, problems, "tool", lambda i, path, message: definition.problem(
            ["filters", i, *path], message)) if own else ()
        middle = tuple(f for name, filters in self.by_toolset.items() if name in definition.toolsets for f in filters)
        chain = self.outer + middle + inner
        # return_schema: result is the built-in, outermost, so the model reads the value the other filters made.
        if (definition.return_schema or env.settings.return_schema) == "result" \
                and all(f.name != _ATTACH.name for f in chain):
            chain = (_ATTACH, *chain)
        return chain


_ATTACH = Filter("attach_output_schema", BUILTINS["attach_output_schema"]({}))


def shared_filters(env: BuildEnv, toolset_specs: Mapping[str, Sequence[Any]] | None = None
                   ) -> tuple[SharedFilters, list[Problem]]:
    """Resolve the settings' and the toolsets' filters; every problem, at ``<settings>``."""
    problems: list[Problem] = []
    outer = _resolve_all(env.settings.filters, env, problems, "filters", lambda i, path, message: Problem(
        SETTINGS_FILE, 1, 1, f"setting 'filters' [{i}]{_suffix(path)}: {message}"))
    by_toolset: dict[str, tuple[Filter, ...]] = {}
    if not isinstance(toolset_specs or {}, Mapping):
        problems.append(Problem(SETTINGS_FILE, 1, 1, "setting 'toolset_filters': expected a mapping of toolset "
                                                     f"to a list of filters, got {type(toolset_specs).__name__}"))
        toolset_specs = {}
    for toolset, specs in (toolset_specs or {}).items():
        if not isinstance(specs, list | tuple):
            problems.append(Problem(SETTINGS_FILE, 1, 1, f"setting 'toolset_filters' {toolset}: expected a list of "
                                                         f"filters, got {type(specs).__name__}"))
            continue
        by_toolset[str(toolset)] = _resolve_all(specs, env, problems, ("toolset_filters", str(toolset)),
                                                lambda i, path, message, t=toolset: Problem(
            SETTINGS_FILE, 1, 1, f"setting 'toolset_filters' {t} [{i}]{_suffix(path)}: {message}"))
    return SharedFilters(outer, by_toolset), problems


def build_chains(tools: Iterable[ToolDefinition], env: BuildEnv,
                 toolset_specs: Mapping[str, Sequence[Any]] | None = None) -> tuple[FilterChains, list[Problem]]:
    """Resolve the settings', toolsets' and tools' filters once per build; every problem, each where it is."""
    shared, problems = shared_filters(env, toolset_specs)
    chains: dict[str, tuple[Filter, ...]] = {}
    for definition in tools:
        chain = shared.chain(definition, env, problems)
        if chain:
            chains[definition.id] = chain
    return FilterChains(chains), problems


def _suffix(path: Sequence[str | int]) -> str:
    return "".join(f".{step}" if isinstance(step, str) else f"[{step}]" for step in path)


def _resolve_all(specs: Iterable[Any], env: BuildEnv, problems: list[Problem], place: str | tuple[str, ...],
                 where: Callable[[int, Sequence[str | int], str], Problem]) -> tuple[Filter, ...]:
    """Each spec resolved, declared in the list ``place`` names; each problem added to ``problems``."""
    resolved = []
    for index, spec in enumerate(specs):
        try:
            resolved.append(resolve(spec, env, (place, index)))
        except FilterProblem as exc:
            problems.append(where(index, exc.path, str(exc)))
    return tuple(resolved)
