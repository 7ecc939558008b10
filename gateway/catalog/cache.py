"""What a rebuild reuses from the builds before it, so that changing one file among 10,000 tools costs little.

``BuildCache`` answers by content, so that a catalog stays a pure function of the files it was built from: built
tools are keyed by their definition (the loader returns the very same ``ToolDefinition`` for a file whose path
and bytes did not change) and by the content of whatever else the build read (``gateway.definitions.filedigests``): the
``python/`` modules for a python binding, the script for a browser binding. Warnings a build reported are
replayed when its tool is reused. It keeps whatever the catalog's build returns (``BuiltTool``), so it needs no
catalog.

A cache belongs to one running gateway (one settings, one definitions directory) and serves one build at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from ..definitions.binding_kinds import PYTHON_DIR
from ..definitions.filedigests import FileDigests
from ..errors import Problem
from .per_file import FileBuilds

if TYPE_CHECKING:
    from ..bindings import BuildEnv
    from ..definitions.model import ToolDefinition


class BuiltTool(Protocol):
    """What the cache reads of a built tool (``gateway.catalog.snapshot.Tool``)."""

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def script(self) -> Path | None: ...


T = TypeVar("T", bound=BuiltTool)


class _Built(NamedTuple, Generic[T]):  # a tuple: made for each of 10,000 tools on a start, 3x a frozen dataclass
    tool: T
    python: str | None  # digest of python/ it was built against, for a python binding
    script: tuple[str, str] | None  # (resolved path, digest) of its browser script
    warnings: tuple[Problem, ...]


class BuildCache(Generic[T]):
    """Built tools and file digests kept between the builds of one gateway."""

    def __init__(self) -> None:
        self.files = FileDigests()
        self._tools: dict[ToolDefinition, _Built[T]] = {}  # ToolDefinition compares by identity
        # The latest build's results per file, when it was built file by file (gateway.catalog.per_file).
        self.file_builds = FileBuilds()
        self.lock: dict[Any, Any] = {}  # the lock file as last read (gateway.catalog.held)

    def python_digest(self, env: BuildEnv) -> str:
        """Digest of ``<definitions>/python/*.py``, computed once per build."""
        key = ("buildcache", "python-digest")
        if key not in env.memo:
            env.memo[key] = self.files.tree(env.root / PYTHON_DIR, "*.py")
        return env.memo[key]

    def tool(self, definition: ToolDefinition, env: BuildEnv,
             build: Callable[[ToolDefinition, BuildEnv], T]) -> T:
        """The tool built from ``definition``: reused when nothing it was built from changed, else ``build``."""
        built = self._tools.get(definition)
        # Asked for each of 10,000 tools on every reload: the common case (nothing changed) stays short.
        # env.python_digest is set by build_catalog before any tool is built: for the definitions directory its
        # python/ modules, for a plugin its version and whole package.
        if (built is not None and (built.python is None or built.python == env.python_digest)
                and (built.script is None or self._script(built.tool, env) == built.script)):
            if built.warnings:
                env.warnings.extend(built.warnings)
            return built.tool
        python = env.python_digest if "python" in definition.binding else None
        before = len(env.warnings)
        tool = build(definition, env)  # raises BindingProblems; failures are not cached, they are retried
        warnings = tuple(env.warnings[before:]) if len(env.warnings) > before else ()
        self._tools[definition] = _Built(tool, python, None if tool.script is None else self._script(tool, env),
                                         warnings)
        return tool

    def script_digest(self, tool: T) -> str:
        """Digest of the browser script of a tool this cache just returned, as its build (or reuse) saw it."""
        state = self._tools[tool.definition].script
        return state[1] if state else ""

    def retain(self, definitions: Iterable[ToolDefinition]) -> None:
        """Forget the tools of definitions that are gone and the files no longer read (once per build, at its end)."""
        keep = set(definitions)
        if len(self._tools) > len(keep):  # every kept one is cached: only then is anything stale
            self._tools = {d: built for d, built in self._tools.items() if d in keep}
        self.files.sweep()

    def forget(self, definitions: Iterable[ToolDefinition]) -> None:
        """Forget the tools of ``definitions`` (their files are gone) and the files no longer read: ``retain``
        for a build that knows what went."""
        for definition in definitions:
            self._tools.pop(definition, None)
        self.files.sweep()

    def _script(self, tool: T, env: BuildEnv) -> tuple[str, str] | None:
        if tool.script is None:
            return None
        declared = env.root / tool.definition.binding["browser"]["script"]
        try:
            # Where the script resolves now (a ConfigMap swap moves it) and what it holds now.
            return os.path.realpath(declared), self.files.digest(tool.script)
        except OSError:
            return "", ""  # gone: never equal to a recorded state, so the tool is rebuilt and the loss reported
