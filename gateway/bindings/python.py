"""``binding: {python: "module:function"}`` — a Python callable, sync (run in a thread) or async (awaited).

Only trusted code is imported: modules in ``<definitions>/python/`` and packages named in the settings'
``allowed_packages``; for a plugin's tools, its own package instead of ``<definitions>/python/``. The check happens before the import, since importing runs the module's code — which is
why the import itself runs under a time limit (``gateway.bindings.imports``) and calls run through
``gateway.bindings.workers`` (threads for sync functions, a cap per tool, exits turned into failures).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from ..context import CONTEXT_PARAMETERS, TALKING_PARAMETERS, CallContext
from ..definitions.binding_kinds import PYTHON_DIR
from ..definitions.model import ToolDefinition
from ..schema.signature import (
    SchemaDerivationError,
    coercer,
    parameters,
    schema_for_function,
    schema_for_return,
    type_hints,
)
from . import BindingProblems, Bound, BuildEnv
from .imports import import_within
from .workers import call_async, call_sync

_lock = threading.Lock()
_switch = threading.Condition()  # guards _importing
_importing = 0  # local imports under way from _active_dir
_active_dir: Path | None = None
_loaded_digest: str | None = None
_plugin_digests: dict[str, str] = {}  # plugin package -> digest of the files its modules were imported from
_seen_dirs: set[Path] = set()  # every <definitions>/python made importable in this process


def trusted_function(target: str, env: BuildEnv) -> Any:
    """The callable ``module:function`` names, if the trust rule allows it (``<definitions>/python/`` or an allowed
    package, for the module and for where the function is defined); else why not, as a message for the admin.

    Python bindings and invocation filters (``gateway.filters.chains``) name functions under this one rule.
    """
    # 10,000 tools may bind one function: the answer is the same for each within a build.
    key = ("python-function", target)
    if key not in env.memo:
        env.memo[key] = _trusted_function(target, env)
    return env.memo[key]


def _trusted_function(target: str, env: BuildEnv) -> Any:
    module_name, _, attribute = target.partition(":")
    python_dir = env.memo.get("python-dir-resolved") or env.memo.setdefault(
        "python-dir-resolved", (env.root / PYTHON_DIR).resolve())
    # Many tools share a module: import and check it once per build, report it at every tool that names it.
    key = ("python-module", module_name)
    if key not in env.memo:
        env.memo[key] = _import_trusted(module_name, python_dir, env)
    module = env.memo[key]
    if isinstance(module, str):
        return module
    function = getattr(module, attribute, None)
    if function is None:
        return f"module '{module_name}' has no attribute '{attribute}'"
    if not callable(function):
        return f"'{target}' is not callable (it is {type(function).__name__})"
    origin = _defined_in(function)
    # The module in hand, not sys.modules' entry: a build of another directory since may have forgotten it there.
    local = not env.package and _is_local_module(module if origin == module.__name__ else sys.modules.get(origin or ""),
                                                 python_dir)
    if not (local or _allowed(origin or "", _trusted_packages(env))):
        # A trusted module may import anything (`from subprocess import run`): what runs must be trusted too.
        where = f"the plugin's package '{env.package}'" if env.package else f"{PYTHON_DIR}/"
        return (f"'{target}' is defined in module '{origin}', which is not allowed: name the function where it is "
                f"defined, from {where} or an allowed package")
    return function


def build(definition: ToolDefinition, env: BuildEnv) -> Bound:
    # Asked for each of 10,000 tools that often bind one function: what depends on the function alone is memoised
    # per build, and the common path makes no closure.
    target = definition.binding["python"]
    function = trusted_function(target, env)
    if isinstance(function, str):
        raise _failed(definition, function)
    derived = None if definition.input_schema is not None else _derived("input", function, target, env)
    if isinstance(derived, str):
        raise _failed(definition, f"cannot derive an input schema from '{target}': {derived}")
    facts = _facts(target, function, env)
    talking = [name for name in facts.injected if name in TALKING_PARAMETERS]
    if talking and not facts.is_async:
        # They are coroutine functions of the event loop, which a sync tool's thread cannot await.
        raise _failed(definition, f"'{target}' declares {', '.join(repr(n) for n in talking)}, which only an async "
                                  "function can use: make it `async def`")
    if not _fits(definition, facts, env):
        raise BindingProblems(_signature_mismatch(definition, facts))
    output = None if definition.output_schema is not None else _derived("output", function, target, env)
    if isinstance(output, str):
        # Results were never checked against a return annotation: one that has no schema is no reason to refuse
        # a tool that served before. Said once per tool, so the admin can fix the annotation or declare a schema.
        env.warnings.append(definition.problem(["binding", "python"], f"no output schema derived from '{target}': "
                                               f"{output}; declare output_schema to give one", severity="warning"))
        output = None
    slots = ((env.root, definition.id), env.settings.max_concurrent_calls_per_tool)
    return Bound(executor=_Executor(definition.id, function, facts, slots), input_schema=derived,
                 output_schema=output, talks=bool(talking))


def _failed(definition: ToolDefinition, message: str) -> BindingProblems:
    return BindingProblems([definition.problem(["binding", "python"], message)])


@dataclass(frozen=True, slots=True)
class _Facts:
    """What calls and checks need of a function's signature: read once per function and build, not per tool."""

    params: dict[str, inspect.Parameter]  # the parameters a caller gives (context ones left out)
    injected: tuple[str, ...]  # context parameters the gateway fills
    takes_any: bool  # **kwargs
    coercers: dict[str, Callable[[Any], Any]]  # the parameters whose values coerce changes (signature.coercer)
    is_async: bool


def _facts(target: str, function: Any, env: BuildEnv) -> _Facts:
    key = ("python-facts", target)
    if key not in env.memo:
        signature = inspect.signature(function)
        try:
            hints = type_hints(function)
        except Exception:  # noqa: BLE001  # hints were optional for a tool with an explicit schema: values pass
            hints = {}
        env.memo[key] = _Facts(
            params={p.name: p for p in parameters(function, CONTEXT_PARAMETERS)},
            injected=tuple(name for name in signature.parameters if name in CONTEXT_PARAMETERS),
            takes_any=any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()),
            coercers={name: step for name, hint in hints.items() if (step := coercer(hint)) is not None},
            is_async=inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
                getattr(function, "__call__", None)),  # noqa: B004  # a callable object's async __call__
        )
    return env.memo[key]


def _derived(which: str, function: Any, target: str, env: BuildEnv) -> dict[str, Any] | str | None:
    """The function's derived ``which`` ("input"/"output") schema, or why there is none; once per function and
    build (many tools may bind one function)."""
    key = ("python-schema", which, target)
    if key not in env.memo:
        try:
            env.memo[key] = schema_for_function(function, CONTEXT_PARAMETERS) if which == "input" \
                else schema_for_return(function)
        except SchemaDerivationError as exc:
            env.memo[key] = str(exc)
    return env.memo[key]


def _is_local(python_dir: Path, module_name: str) -> bool:
    top = module_name.split(".")[0]
    return (python_dir / f"{top}.py").is_file() or (python_dir / top / "__init__.py").is_file()


def _import_trusted(module_name: str, python_dir: Path, env: BuildEnv) -> ModuleType | str:
    """The module, if it is trusted and imports; else why not (a message for the admin)."""
    if env.package:
        return _import_plugin(module_name, python_dir, env)
    local = _is_local(python_dir, module_name)
    if not local and not _allowed(module_name, env.settings.allowed_packages):
        allowed = ", ".join(env.settings.allowed_packages) or "none"
        return (f"module '{module_name}' is not allowed: put it in {PYTHON_DIR}/ of the definitions directory or "
                f"add its package to allowed_packages (allowed packages: {allowed})")
    if local:
        with _importable(python_dir, env.python_digest):
            _forget_foreign(module_name, python_dir)
            # A local import is known by its directory and content: one begun for another directory (an abandoned
            # build's, a draft check's) is stale here even when the files are the same.
            module = import_within(module_name, f"{python_dir}:{env.python_digest}", env.settings.import_timeout_s)
    else:
        module = import_within(module_name, None, env.settings.import_timeout_s)
    if isinstance(module, str):
        return module
    if local and not Path(getattr(module, "__file__", None) or "/").resolve().is_relative_to(python_dir):
        return (f"module '{module_name}' in {PYTHON_DIR}/ has the name of an installed module "
                f"({getattr(module, '__file__', None) or 'built in'}); rename it")
    return module


@contextlib.contextmanager
def _importable(python_dir: Path, digest: str) -> Iterator[None]:
    """``python_dir`` on sys.path for the length of an import from it.

    sys.path is the process's: a build of another directory (tests run several gateways in one process) must not
    take this one off it between its switch and the import's look-up (that failed a CI run with "No module named
    'who'"). It waits for imports under way from another directory; builds of the same directory, which is all a
    serving gateway has, never wait for each other (a build abandoned on a hung import still waits in it).
    """
    global _importing
    with _switch:
        _switch.wait_for(lambda: _importing == 0 or _active_dir == python_dir)
        refresh_local_modules(python_dir, digest)
        _importing += 1
    try:
        yield
    finally:
        with _switch:
            _importing -= 1
            _switch.notify_all()


def _import_plugin(module_name: str, python_dir: Path, env: BuildEnv) -> ModuleType | str:
    """A plugin's module: from its own python/ (as a module of its package), else from its package or an
    allowed one; never from <definitions>/python/, whose modules may share its names."""
    if _is_local(python_dir, module_name):
        module_name = f"{env.modules}.{PYTHON_DIR}.{module_name}"
    elif not _allowed(module_name, _trusted_packages(env)):
        return (f"module '{module_name}' is not allowed: a plugin names modules in its {PYTHON_DIR}/ or its package "
                f"'{env.package}' (or an allowed package)")
    refresh_plugin_modules(env.package, env.python_digest)
    return import_within(module_name, None, env.settings.import_timeout_s)


def refresh_plugin_modules(package: str, digest: str) -> None:
    """Forget a plugin package's modules when its files changed (``pip install -U``), so the next import reads
    the new ones; a catalog built before keeps the functions it holds."""
    with _lock:
        if _plugin_digests.get(package) == digest:
            return
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]
        importlib.invalidate_caches()
        _plugin_digests[package] = digest


def _defined_in(function: Any) -> str | None:
    """The module that defines what a call runs: the function's own, a partial's target's, a callable's class's."""
    while isinstance(function, partial):
        function = function.func
    target = function if inspect.isfunction(function) or inspect.isclass(function) or inspect.isbuiltin(function) \
        else type(function)
    return getattr(inspect.unwrap(target), "__module__", None)


def _is_local_module(module: ModuleType | None, python_dir: Path) -> bool:
    file = getattr(module, "__file__", None)
    return bool(file) and Path(file).resolve().is_relative_to(python_dir)


def _trusted_packages(env: BuildEnv) -> tuple[str, ...]:
    """The packages whose code is trusted besides ``<definitions>/python/``: a plugin's own, and the allowed ones."""
    return (env.package, *env.settings.allowed_packages) if env.package else env.settings.allowed_packages


def _allowed(module_name: str, allowed_packages: tuple[str, ...]) -> bool:
    return any(module_name == pkg or module_name.startswith(pkg + ".") for pkg in allowed_packages)


def refresh_local_modules(python_dir: Path, digest: str) -> None:
    """Make ``<definitions>/python`` importable, and forget its modules when any of its files changed.

    One such directory is importable at a time (a process serves one definitions directory; tests build
    several), so switching directories also forgets the previous directory's modules, which may share names.
    Functions of a previous import stay alive in the catalog that holds them; the next catalog gets fresh
    modules. Other modules are never touched. ``digest`` is the directory's content digest for this build.
    """
    global _active_dir, _loaded_digest
    with _lock:
        if _active_dir == python_dir and _loaded_digest == digest:
            return
        for directory in {python_dir, _active_dir} - {None}:
            _forget_modules(directory)
            while str(directory) in sys.path:
                sys.path.remove(str(directory))
        # Appended, not prepended: a local module must never shadow the standard library or a package.
        sys.path.append(str(python_dir))
        _forget_bytecode(python_dir)
        importlib.invalidate_caches()
        _active_dir, _loaded_digest = python_dir, digest
        _seen_dirs.add(python_dir)


def _forget_foreign(module_name: str, python_dir: Path) -> None:
    """Forget a module of that name imported from another definitions directory's python/ after this one became
    the importable one: a build abandoned when it ran out of time goes on importing in its thread, from its own
    directory, and what it leaves in ``sys.modules`` must not be taken for this directory's module (nor for an
    installed one). Installed modules are never touched."""
    top = module_name.split(".")[0]
    with _lock:
        others = _seen_dirs - {python_dir}
        if not others:  # a serving gateway's one directory: nothing foreign to look for
            return
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            file = getattr(sys.modules[name], "__file__", None)
            if file and any(Path(file).resolve().is_relative_to(other) for other in others):
                del sys.modules[name]


def _forget_bytecode(directory: Path) -> None:
    # Python trusts a cached .pyc whose source has the same mtime, in whole seconds, and the same size: an edit
    # within a second of the last import that keeps the file's size would run the old code.
    for cached in directory.rglob("__pycache__/*.pyc"):
        with contextlib.suppress(OSError):  # a read-only mount: nothing was cached there either
            cached.unlink()


def _forget_modules(directory: Path) -> None:
    # The directory is on sys.path resolved, so its modules' files start with it: resolving each of the process's
    # ~1,000 module files instead cost 160 ms a switch.
    prefix = os.path.join(directory, "")
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and file.startswith(prefix):
            del sys.modules[name]


def _fits(definition: ToolDefinition, facts: _Facts, env: BuildEnv) -> bool:
    """Whether the explicit input schema fits the function (``_signature_mismatch`` finds nothing): asked once per
    function and set of (property names, required names) within a build, as 10,000 tools often share both."""
    schema = definition.input_schema
    if schema is None:
        return True
    try:
        key = ("python-fits", definition.binding["python"], tuple(schema.get("properties", ())),
               tuple(schema.get("required", ())))
        hash(key)
    except TypeError:  # a name that is not a string: the schema check reported it
        return not _signature_mismatch(definition, facts)
    fits = env.memo.get(key)
    if fits is None:
        fits = env.memo[key] = not _signature_mismatch(definition, facts)
    return fits


def _signature_mismatch(definition: ToolDefinition, facts: _Facts) -> list:
    """With an explicit input_schema, every property must reach a parameter, and every required one be required."""
    schema = definition.input_schema
    if schema is None:
        return []
    takes_any, params = facts.takes_any, facts.params
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    problems = []
    for name in properties:
        if name not in params and not takes_any:
            problems.append(definition.problem(
                ["input_schema", "properties", name],
                f"property '{name}' is not a parameter of '{definition.binding['python']}'", key=True))
    for name, param in params.items():
        if param.default is param.empty and name not in required:
            problems.append(definition.problem(
                ["input_schema"],
                f"parameter '{name}' of '{definition.binding['python']}' has no default, so input_schema must "
                f"list it in 'required'"))
    return problems


class _Executor:
    """A python tool's executor; an object rather than a closure, as the facts it reads are shared by every tool
    that binds the function (10,000 closures held ~450 bytes each)."""

    __slots__ = ("facts", "function", "slots", "tool_id")

    def __init__(self, tool_id: str, function: Any, facts: _Facts, slots: tuple[Any, int]) -> None:
        self.tool_id, self.function, self.facts, self.slots = tool_id, function, facts, slots

    async def __call__(self, arguments: dict[str, Any], context: CallContext) -> Any:
        facts = self.facts
        coercers = facts.coercers
        kwargs = {
            name: coercers[name](value) if name in coercers else value
            for name, value in arguments.items()
            if name in facts.params or facts.takes_any
        }
        kwargs.update({name: context.value(name, self.tool_id) for name in facts.injected})
        if facts.is_async:
            return await call_async(self.function, kwargs)
        # A timed-out sync tool cannot be interrupted: the await is abandoned and the caller gets its error at
        # once, while the thread finishes on its own, holding one of its tool's slots (gateway.bindings.workers).
        return await call_sync(*self.slots, self.function, kwargs)
