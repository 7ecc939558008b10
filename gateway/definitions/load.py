"""Loading tool definitions (``gateway.definitions.model``) from a directory.

Loading is the first of two phases (the second is ``build_catalog``): every file is parsed and checked on its
own (``gateway.definitions.parse``), then the files are checked against each other. Each file's outcome depends
on its bytes alone, so it is cached by content hash: reloading a directory of 10,000 tools re-parses only the
files that changed.

What a file may cost is bounded (``YamlLimits``: its size, read from ``stat`` before any byte; its nodes with
aliases expanded), and only files whose real path lies inside the real definitions directory are read: the
rule browser scripts follow (``gateway.definitions.paths``).

A YAML file whose top level has an ``openapi:`` or ``swagger:`` key is a document a source reads, not a
definitions file: it is not parsed here.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import Problem
from .filedigests import FileDigests, FileRefused
from .model import SourceDeclaration, ToolDefinition
from .parse import DEFAULT_LIMITS, FileDefinitions, Override, parse_definitions, repeated_source
from .paths import outside_message, real_inside, unfollowable_message
from .prompts_resources import Declared, repeated_keys
from .toolids import ToolIds
from .yamlbudget import YamlLimits
from .yamlsource import ParsedStore

YAML_SUFFIXES = (".yaml", ".yml")
# A definitions file cannot have these top-level keys (the schema allows none but its own): an API document.
_API_DOCUMENT = re.compile(r"^[\"']?(openapi|swagger)[\"']?\s*:", re.MULTILINE)


@dataclass(frozen=True, eq=False)
class Definitions:
    """Every definition in a directory, with every problem found while loading it."""

    root: Path
    files: tuple[FileDefinitions, ...]
    problems: tuple[Problem, ...]
    repeated: frozenset[str] = frozenset()  # ids declared more than once (each repeat is one of the problems)

    @property
    def tools(self) -> list[ToolDefinition]:
        """The tools that passed every check so far, in file order."""
        return [tool for file in self.files for tool in file.buildable]

    @property
    def overrides(self) -> list[Override]:
        return [override for file in self.files for override in file.overrides]

    @property
    def sources(self) -> list[SourceDeclaration]:
        """The sources every file declares, in file order (a repeated id was reported; the first is kept)."""
        return [source for file in self.files for source in file.sources]

    @property
    def prompts(self) -> list[Declared]:
        return [prompt for file in self.files for prompt in file.prompts]

    @property
    def resources(self) -> list[Declared]:
        return [resource for file in self.files for resource in file.resources]

    @property
    def digest(self) -> str:
        return hashlib.sha256("".join(f.file + f.digest for f in self.files).encode()).hexdigest()


def duplicate_sources(files: Iterable[FileDefinitions]) -> list[Problem]:
    """One problem per source id declared in two files, at the repeat; the first declaration is kept."""
    first: dict[str, SourceDeclaration] = {}
    problems = []
    for file in files:
        for source in file.sources:
            earlier = first.setdefault(source.id, source)
            if earlier is not source:
                problems.append(repeated_source(source, earlier))
    return problems


def api_documents(files: Iterable[FileDefinitions]) -> list[Problem]:
    """A warning for each API document below the definitions directory that no source names as its ``spec``."""
    files = list(files)
    if not any(f.api_document for f in files):  # the common case: no set of every source's spec to make
        return []
    named = {os.path.normpath(str(source.settings.get("spec", ""))) for f in files for source in f.sources}
    return [Problem(f.file, 1, 1, "an OpenAPI document, not a definitions file, and no source names it as its "
                                  "spec: its operations are not served (declare `sources: [{id: ..., openapi: "
                                  f"{{spec: {f.file}}}}}]`)", "warning")
            for f in files if f.api_document and os.path.normpath(f.file) not in named]


def yaml_files(root: Path, label: str = "") -> tuple[list[tuple[str, str]], list[Problem]]:
    """(path, path shown in messages: ``label`` then the path relative to ``root``, with '/') of every YAML file
    below ``root``, and a problem for each link that leads outside it.

    Stable order (a directory's files, then its subdirectories, by name); hidden files and directories are
    skipped. Links are followed while they stay inside the real definitions directory, so a Kubernetes ConfigMap
    mount (names linked through ``..data`` to a hidden ``..<timestamp>`` directory) works. A YAML file linked
    from outside is an error, as a browser script there is; a directory linked from outside is not searched and
    a warning says so (it may be ``python/``, whose modules the python binding finds under its own rule). A link
    that cannot be followed (links leading round: ``a -> b -> a``, a link to itself) is a problem at it, the same
    way (an error for a YAML name, else a warning); a directory linked to one it is inside is walked once.
    """
    base = os.path.realpath(root)
    found: list[tuple[str, str]] = []
    refused: list[Problem] = []
    visited: set[str] = set()  # real directories already walked: a symlink loop is walked once
    pending = [(str(root), label)]
    while pending:
        directory, prefix = pending.pop()
        real = os.path.realpath(directory)
        if real in visited:
            continue
        visited.add(real)
        try:
            entries = sorted((e for e in os.scandir(directory) if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError:  # vanished or unreadable since it was listed: the next build settles it
            continue
        subdirectories = []
        for entry in entries:
            shown = prefix + entry.name
            is_yaml = entry.name.endswith(YAML_SUFFIXES)
            try:
                is_dir = entry.is_dir()
            except OSError as exc:  # ELOOP: links that lead round (a -> b -> a, a link to itself) reach nothing
                # A YAML name is a definitions file that cannot be read, as any other; any other name may have been
                # a directory of them.
                consequence = "not loaded" if is_yaml else "not searched for definitions"
                refused.append(Problem(shown, 1, 1, unfollowable_message(entry.path, root, exc, consequence),
                                       "error" if is_yaml else "warning"))
                continue
            if is_dir:
                if not entry.is_symlink() or real_inside(entry.path, base):
                    subdirectories.append((entry.path, shown + "/"))
                else:
                    message = outside_message(entry.path, "YAML files there are not loaded")
                    refused.append(Problem(shown + "/", 1, 1, message, "warning"))
            elif is_yaml and entry.is_symlink() and not real_inside(entry.path, base):
                refused.append(Problem(shown, 1, 1, outside_message(entry.path, "not loaded")))
            elif is_yaml:
                found.append((entry.path, shown))
        pending += reversed(subdirectories)
    return found, refused


class DefinitionsCache:
    """Parsed files keyed by (path, content hash); a reload re-parses only what changed.

    Files are read again only when their stat signature changed (``FileDigests``), so a reload of 1,000 unchanged
    files costs 1,000 ``stat`` calls.
    """

    def __init__(self, store: ParsedStore | None = None) -> None:
        self.store = store  # parses kept between runs (a serving gateway's), or None
        # Shown name -> the file parsed under it last: an edit replaces its entry, so only deletions leave any.
        self._files: dict[str, FileDefinitions] = {}
        self._digests = FileDigests()
        self._plugins: dict[str, DefinitionsCache] = {}
        self.ids = ToolIds()  # where each id is declared: repeats are found in what changed

    def plugin(self, name: str) -> DefinitionsCache:
        """The cache of plugin ``name``'s files: each source keeps (and retains) its own."""
        return self._plugins.setdefault(name, DefinitionsCache())

    def load(self, path: str, file: str, limits: YamlLimits) -> FileDefinitions:
        """The definitions in the file at ``path`` (shown as ``file``); raises ``OSError`` if it cannot be read,
        ``FileRefused`` if it is larger than ``limits`` allow or not a regular file."""
        digest, data = self._digests.read(path, limits.max_file_bytes)
        cached = self._files.get(file)
        if cached is None or cached.digest != digest:
            if data is None:  # its digest is known from an earlier read, but it was not parsed under this name
                # Read again with its digest: the bytes may have changed since, and a kept parse is named by it.
                digest, data = self._digests.read(path, limits.max_file_bytes, force=True)
                data = data or b""
            cached = self._files[file] = _parse_bytes(file, data, limits, self.store, digest)
        return cached

    def retain(self, keep: Sequence[FileDefinitions]) -> None:
        """Forget every parsed file that is not in ``keep`` (the files of the latest load, each from ``load``)."""
        if len(self._files) > len(keep):  # each kept one has its entry: only then is anything stale
            wanted = {f.file for f in keep}
            self._files = {name: parsed for name, parsed in self._files.items() if name in wanted}
        self._digests.sweep()
        if self.store is not None:
            self.store.retain(f.digest for f in keep)


def _parse_bytes(file: str, data: bytes, limits: YamlLimits, store: ParsedStore | None, digest: str) -> FileDefinitions:
    """The definitions of ``data``, whose SHA-256 is ``digest``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileDefinitions(file, digest, (), (Problem(file, 1, 1, f"not UTF-8: {exc}"),))
    # The substring tests are C-fast and settle almost every file: the pattern runs only where a name occurs.
    if (("openapi" in text or "swagger" in text) and _API_DOCUMENT.search(text, 0, 65_536)
            and not re.search(r"^tools\s*:", text, re.MULTILINE)):
        return FileDefinitions(file, digest, (), (), api_document=True)
    return parse_definitions(file, text, limits, store, digest)


def load_definitions(root: str | os.PathLike[str], cache: DefinitionsCache | None = None, *,
                     limits: YamlLimits = DEFAULT_LIMITS, label: str = "") -> Definitions:
    """Load every definitions file below ``root``, collecting every problem (never stopping at the first).

    Files are named in messages by their path below ``root`` after ``label`` (a plugin's ``<name>:``).
    """
    root = Path(root)
    if not root.is_dir():
        problem = Problem(label or str(root), 1, 1, "definitions directory does not exist" if not root.exists() else
                          "not a directory: give the directory of definitions files, not one of them")
        return Definitions(root, (), (problem,))
    cache = cache if cache is not None else DefinitionsCache()
    files: list[FileDefinitions] = []
    paths, problems = yaml_files(root, label)
    for path, shown in paths:
        try:
            parsed = cache.load(path, shown, limits)
        except FileNotFoundError:
            continue  # deleted since listing, or a dangling link (a ConfigMap key mid-removal): not there
        except FileRefused as exc:
            problems.append(Problem(shown, 1, 1, str(exc)))
            continue
        except OSError as exc:  # unreadable
            problems.append(Problem(shown, 1, 1, f"cannot read file: {exc.strerror}"))
            continue
        files.append(parsed)
        problems += parsed.problems
    cache.retain(files)
    repeats, repeated = cache.ids.update(files)
    problems += repeats
    problems += duplicate_sources(files)
    problems += repeated_keys(entry for file in files for entry in (*file.prompts, *file.resources))
    problems += api_documents(files)
    return Definitions(root, tuple(files), tuple(problems), repeated)
