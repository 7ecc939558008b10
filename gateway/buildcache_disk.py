"""Definitions files that parsed and checked cleanly, kept on disk, so that a restart with 10,000 unchanged tools
neither parses nor checks them again.

What is kept is the plain data a file parsed to (JSON), never code or objects: the catalog is still built from
it (Python modules imported, schemas compiled), so a restart serves what a cold start would. The parse and the
checks are a function of the file's text, the YAML limits and the gateway's code alone: an entry is named by a
digest of the text and the limits, in a directory named by the gateway's release and a digest of its code and
schema files (an upgrade or an edited checkout never reads an older entry). An entry holds the SHA-256 of its
own payload: a corrupted or truncated entry is a miss (the file is parsed and checked again and the entry
rewritten), never data served. Only files without any problem (not even a warning) whose data survives a JSON
round trip unchanged (string keys, no NaN) are kept.

Where: ``<state dir>/build/<key>/`` (``gateway.sources.cache.state_dir``: ``$TOOL_GATEWAY_STATE_DIR``, else
``$XDG_CACHE_HOME/tool-gateway``, else ``~/.cache/tool-gateway``). Safe to delete at any time; directories of
other keys are removed when a gateway opens its own. Writes are atomic; a directory that cannot be written
(read-only) only means no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson  # 5-10x the standard json's speed on 10,000 tools' data, and it shares repeated keys on load

from .schemas import SCHEMAS_DIR
from .sources.cache import save, state_dir
from .yamlbudget import YamlLimits

log = logging.getLogger(__name__)
MISSING = object()
_PACKAGE = Path(__file__).parent


@cache
def code_digest() -> str:
    """A digest of the gateway's release and of its code and schema files as they are (path, size, mtime)."""
    try:
        release = version("tool-gateway")
    except PackageNotFoundError:  # a source tree never installed: its files alone say what it is
        release = ""
    digest = hashlib.sha256(release.encode())
    for path in sorted([*_PACKAGE.rglob("*.py"), *SCHEMAS_DIR.rglob("*.json")]):
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(f"{path.relative_to(path.parents[1])}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class ParsedFiles:
    """The on-disk store of parsed files for this gateway's code; entries are kept per YAML limits."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / code_digest()[:24]
        self._prune(directory, keep=self.directory.name)

    @classmethod
    def default(cls) -> ParsedFiles:
        return cls(state_dir() / "build")

    def get(self, text: str, limits: YamlLimits) -> Any:
        """The data ``text`` parsed to when it was kept, else ``MISSING``."""
        path = self._path(text, limits)
        try:
            raw = path.read_bytes()
        except OSError:
            return MISSING
        checksum, _, payload = raw.partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() != checksum:
            log.warning("build cache entry %s is corrupted: parsing its file again", path)
            return MISSING
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:
            return MISSING

    def put(self, text: str, limits: YamlLimits, data: Any) -> None:
        """Keep ``data`` as what ``text`` parses to, when JSON holds it unchanged."""
        try:
            payload = orjson.dumps(data)
        except TypeError:  # a key that is not a string, a value JSON has no form for
            return
        if orjson.loads(payload) != data:  # NaN, or anything else JSON would change
            return
        try:
            save(self._path(text, limits), hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        except OSError as exc:
            log.debug("build cache not written (%s): parsing again next time", exc)

    def _path(self, text: str, limits: YamlLimits) -> Path:
        # The limits decide which texts parse at all: a text kept under looser ones is not read under others.
        name = hashlib.sha256(f"{limits!r}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / name[:2] / name[2:]

    @staticmethod
    def _prune(directory: Path, keep: str) -> None:
        """Remove the entries of other keys (older releases, other limits): they are never read again."""
        with contextlib.suppress(OSError):
            for other in directory.iterdir():
                if other.name != keep and other.is_dir():
                    shutil.rmtree(other, ignore_errors=True)
