"""YAML files that can say where each of their values came from.

Parsing uses PyYAML's C loader when it is available, within the limits of ``gateway.definitions.yamlbudget``: a text that
could cost more than its size (aliases, deep nesting) is measured before it is built. Positions are not recorded while parsing (that would cost
time and memory on every load, for the rare file that is wrong): the first time a problem needs one, the file
is composed again into a node tree and the node at a JSON path is found there.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import yaml

from ..errors import Problem
from .yamlbudget import YamlLimits, event_problem, plan, tree_problem

try:
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    _BaseLoader = yaml.SafeLoader

Path = Sequence[str | int]


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loader that reports duplicate mapping keys instead of silently keeping the last one."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.duplicate_keys: list[tuple[int, int, object]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:  # type: ignore[override]
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen:
                mark = key_node.start_mark
                self.duplicate_keys.append((mark.line + 1, mark.column + 1, key))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Keys and short values ("type", "string", a tag) repeat in every tool: one string object each saves ~1 KiB a tool.
INTERN_CHARS = 40


def _construct_str(loader: _Loader, node: yaml.ScalarNode) -> str:
    value = node.value
    return sys.intern(value) if len(value) <= INTERN_CHARS else value


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
# Timestamps stay strings: a tool definition has no use for datetime objects and they are not JSON.
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_str)

# Longer numbers are refused where they stand: PyYAML reads a sexagesimal one ("1:59:59...") in quadratic time
# (a 900 kB value takes a minute), and a long integer fails Python's int/str digit limit (ValueError) or a float
# conversion (OverflowError) — exceptions no caller expects from parsing. No definition needs such a number.
MAX_NUMBER_CHARS = 1_000


def _bounded(construct: Any) -> Any:
    def construct_number(loader: _Loader, node: yaml.ScalarNode) -> Any:
        if len(node.value) > MAX_NUMBER_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"a number of {len(node.value):,} characters (at most {MAX_NUMBER_CHARS:,})",
                node.start_mark)
        try:
            return construct(loader, node)
        except (ValueError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(None, None, f"cannot read the number: {exc}",
                                                    node.start_mark) from exc
    return construct_number


_Loader.add_constructor("tag:yaml.org,2002:int", _bounded(_Loader.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float", _bounded(_Loader.construct_yaml_float))


def _not_json(loader: _Loader, node: yaml.Node) -> Any:
    # bytes and sets would load, then fail every JSON encoding of the tool (its listing, its schema's digest).
    raise yaml.constructor.ConstructorError(None, None, f"a {node.tag.rsplit(':', 1)[-1]} value has no JSON form",
                                            node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:binary", _not_json)
_Loader.add_constructor("tag:yaml.org,2002:set", _not_json)


_last_text: tuple[bytes, str] | None = None  # the text read last: at most one document's text is kept unpacked


class YamlDocument:
    """A parsed file: its data, and its text for the positions a problem needs (kept compressed: a catalog holds
    every file's document, and the text is read again only for a problem or the console)."""

    __slots__ = ("_packed", "_root", "data", "file")

    def __init__(self, file: str, text: str, data: Any, packed: bytes | None = None) -> None:
        self.file = file  # the path shown in messages (relative to the definitions directory)
        self.data = data
        # ``packed``: the text as ``packed`` gave it before (a kept parse), so that it is not compressed again.
        self._packed = packed if packed is not None else zlib.compress(text.encode("utf-8", "surrogatepass"), 1)
        self._root: yaml.Node | None = None

    @property
    def packed(self) -> bytes:
        """The text, compressed: what a kept parse holds to make this document again without compressing."""
        return self._packed

    def __repr__(self) -> str:
        return f"YamlDocument({self.file!r})"

    @property
    def text(self) -> str:
        global _last_text
        last = _last_text
        if last is not None and last[0] is self._packed:  # a problem's positions read the same text in a row
            return last[1]
        text = zlib.decompress(self._packed).decode("utf-8", "surrogatepass")
        _last_text = (self._packed, text)
        return text

    def position(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of the node at ``path`` (of its key when ``key``), or of its nearest parent."""
        if self._root is None:
            self._root = yaml.compose(self.text, Loader=_BaseLoader)
        node = self._root
        mark = node.start_mark if node is not None else None
        last = len(path) - 1
        for index, step in enumerate(path):
            child, key_node = _child(node, step)
            if child is None:
                break
            node = child
            at_key = key and key_node is not None and index == last
            mark = key_node.start_mark if at_key else child.start_mark
        if mark is None:
            return 1, 1
        return mark.line + 1, mark.column + 1

    def problem(self, path: Path, message: str, *, key: bool = False, severity: str = "error") -> Problem:
        line, column = self.position(path, key=key)
        return Problem(self.file, line, column, message, severity)


def _child(node: yaml.Node | None, step: str | int) -> tuple[yaml.Node | None, yaml.Node | None]:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(step):
                return value_node, key_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        return node.value[step], None
    return None, None


class ParsedStore(Protocol):
    """Where the data of files that parsed and checked cleanly is kept between runs, by the SHA-256 of their bytes
    (``gateway.catalog.disk_cache.ParsedFiles``)."""

    def get(self, digest: str, limits: YamlLimits) -> Any: ...  # what ``put`` kept, or a sentinel

    def put(self, digest: str, limits: YamlLimits, kept: tuple[bytes, Any, tuple[Any, ...]]) -> None: ...

    def retain(self, digests: Iterable[str]) -> None: ...


def keep_document(document: YamlDocument, digest: str, limits: YamlLimits, store: ParsedStore,
                  rows: tuple[Any, ...]) -> None:
    """Keep ``document`` (of a file whose bytes' SHA-256 is ``digest``) in ``store``: its packed text, its data and
    ``rows``, what the loader made of it (``gateway.definitions.parse``: its tools' fields)."""
    store.put(digest, limits, (document.packed, document.data, rows))


def kept_document(file: str, text: str, digest: str, limits: YamlLimits,
                  store: ParsedStore) -> tuple[YamlDocument, tuple[Any, ...] | None] | None:
    """The document of ``text`` (whose bytes' SHA-256 is ``digest``) and the rows kept with it, from ``store`` when
    it was kept under the same limits, without parsing."""
    kept = store.get(digest, limits)
    if (isinstance(kept, tuple) and len(kept) == 3 and isinstance(kept[0], bytes)
            and (kept[1] is None or isinstance(kept[1], (dict, list, str, int, float, bool)))):
        return YamlDocument(file, text, kept[1], kept[0]), kept[2] if isinstance(kept[2], tuple) else None
    return None


def parse_yaml(file: str, text: str, limits: YamlLimits) -> tuple[YamlDocument | None, list[Problem]]:
    """Parse one YAML text; return the document (None when it does not parse or goes over a limit) and its problems."""
    if len(text) > limits.max_file_bytes:  # characters: each is a byte or more
        return None, [Problem(file, 1, 1, f"text of {len(text):,} characters is more than max_file_bytes "
                                          f"({limits.max_file_bytes:,})")]
    measure = plan(text, limits)
    if measure.events:
        loader = _BaseLoader(text)
        try:
            excess = event_problem(loader, limits)
        finally:
            loader.dispose()
        if excess is not None:
            return None, [excess.problem(file)]
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        excess = tree_problem(node, limits) if measure.tree and node is not None else None
        if excess is not None:
            return None, [excess.problem(file)]
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = exc.problem or "invalid YAML"
        if exc.context and exc.context_mark and exc.context_mark is not mark:
            start = exc.context_mark
            what = f"{what} ({exc.context} started at line {start.line + 1}, column {start.column + 1})"
        elif exc.context:
            what = f"{exc.context}: {what}"
        return None, [Problem(file, line, column, f"YAML syntax error: {what}")]
    except yaml.YAMLError as exc:
        return None, [Problem(file, 1, 1, f"YAML error: {exc}")]
    finally:
        loader.dispose()
    problems = [
        Problem(file, line, column, f"duplicate key '{key}' (a YAML mapping key must appear once)")
        for line, column, key in loader.duplicate_keys
    ]
    return YamlDocument(file, text, data), problems
