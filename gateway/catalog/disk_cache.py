"""Definitions files that parsed and checked cleanly, kept on disk, so that a restart with 10,000 unchanged tools
neither parses nor checks them again.

What is kept is the plain data a file parsed to, never code or objects: the catalog is still built from it
(Python modules imported, signatures read, schemas derived), so a restart serves what a cold start would. The
parse and the checks are a function of the file's bytes, the YAML limits and the gateway's code alone: an entry is
named by the SHA-256 of the file's bytes, in a snapshot named by the definitions directory and the limits, in a
directory named by a digest of the gateway's code and schema files' contents, the Python version and the parsing
and checking libraries' files (``code_digest``: an upgrade, an edited checkout or a new PyYAML or jsonschema never
reads an older snapshot). Only files without any problem (not even a warning)
are kept.

One snapshot file per definitions directory holds every file's entry: a restart reads one file, not one per
definitions file (1,000 opens and checksums were a tenth of a warm start). An entry is the file's text as its
document keeps it (compressed), its data, and its tools' fields as the loader made them
(``gateway.definitions.yamlsource.keep_document``), so that a restart neither compresses the text again nor reads each tool's
keys one by one. Entries are ``marshal`` data (bytes, tuples, dicts, lists, strings, numbers: what a safe YAML
load gives, kept exactly, NaN and integer keys included), 2-3x faster to load than JSON; ``marshal`` is the
format of Python's own bytecode cache and builds no object but those values. The snapshot holds the SHA-256 of its payload: a corrupted or truncated snapshot is a warning and a miss
(every file parsed and checked again, the snapshot rewritten), never data served. It is written after a build
that parsed something new or no longer needs an entry (``save``), atomically, off the reload's path; a directory
that cannot be written (read-only) only means no cache.

Where: ``<state dir>/build/<key>/`` (``gateway.sources.cache.state_dir``: ``$TOOL_GATEWAY_STATE_DIR``, else
``$XDG_CACHE_HOME/tool-gateway``, else ``~/.cache/tool-gateway``). Safe to delete at any time; directories of
other keys are removed when a gateway opens its own. The snapshot is written 0600; one that another user could
have written (not this user's, or group- or world-writable) is a warning and never read: its checksum only
catches damage, and what it holds skips the checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import marshal
import os
import shutil
import sys
import threading
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from ..definitions.yamlbudget import YamlLimits
from ..schema.published import SCHEMAS_DIR
from ..sources.cache import save, state_dir

log = logging.getLogger(__name__)
MISSING = object()
_PACKAGE = Path(__file__).parents[1]  # the whole gateway package: its files are its release
# The first line of a snapshot: what it is and its layout's version.
MAGIC = b"tool-gateway parsed files 2\n"


# What a parse and its checks run besides the gateway's own files: a new version may read a file otherwise.
_LIBRARIES = ("yaml", "_yaml", "jsonschema", "jsonschema_specifications", "referencing")


@cache
def code_digest() -> str:
    """A digest of what a kept parse depends on besides the file: the contents of the gateway's code and schema
    files (its release is its files), the Python version (whose ``marshal`` format the entries are in), and the
    files of the libraries that parse and check (path, size, mtime: an install of another version rewrites them).
    ~6 ms: finding the release's metadata alone took 15 ms."""
    digest = hashlib.sha256(f"{sys.version}\0{sys.implementation.cache_tag}\n".encode())
    for top in (_PACKAGE, SCHEMAS_DIR):
        for path in _files(str(top), (".py", ".json")):
            with contextlib.suppress(OSError), open(path, "rb") as file:
                digest.update(f"{os.path.relpath(path, top)}\0".encode() + hashlib.sha256(file.read()).digest())
    for name in _LIBRARIES:
        spec = importlib.util.find_spec(name)  # found, not imported
        if spec is None or spec.origin is None:
            continue
        roots = spec.submodule_search_locations or [spec.origin]
        for path in (p for root in roots for p in _files(root)):
            with contextlib.suppress(OSError):
                stat = os.stat(path)
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _files(top: str, suffixes: tuple[str, ...] = ()) -> list[str]:
    """The files below ``top`` (or ``top`` itself, a file) ending in one of ``suffixes`` (any: empty), sorted."""
    if os.path.isfile(top):
        return [top]
    found = []
    for directory, subdirectories, names in os.walk(top):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        found += [os.path.join(directory, name) for name in sorted(names) if name.endswith(suffixes or name)]
    return found


class ParsedFiles:
    """The kept parses of one definitions directory's files, for this gateway's code, in one snapshot file.

    Safe to share between threads (an abandoned build may still be loading while the next one runs).
    """

    def __init__(self, directory: Path, root: str | Path = "") -> None:
        self.directory = directory / code_digest()[:24]
        self._root = str(root)
        self._prune(directory, keep=self.directory.name)
        self._lock = threading.Lock()
        self._limits: YamlLimits | None = None  # the limits of the snapshot read, fixed by the first look-up
        # File digest -> marshal of its entry: every entry, or once released, those added since.
        self._entries: dict[str, bytes] | None = None
        self._released = False
        self._kept: set[str] = set()  # the digests of the latest load's files
        self._dirty = False
        # Saves are numbered as their payloads are taken and written in that order: one that lost the race to
        # the disk to a newer one leaves the newer snapshot in place.
        self._write_lock = threading.Lock()
        self._taken = self._written = 0

    @classmethod
    def default(cls, root: str | Path = "") -> ParsedFiles:
        return cls(state_dir() / "build", root)

    @property
    def path(self) -> Path | None:
        """The snapshot file, once the limits are known (the first look-up)."""
        if self._limits is None:
            return None
        # The limits decide which texts parse at all: what was kept under looser ones is not read under others.
        name = hashlib.sha256(f"{self._root}\0{self._limits!r}".encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / name[:32]

    def get(self, digest: str, limits: YamlLimits) -> Any:
        """What was kept for the file whose bytes have SHA-256 ``digest``, else ``MISSING``."""
        entries = self._read(limits)
        blob = entries.get(digest) if entries is not None else None
        if blob is None:
            return MISSING
        try:
            data = marshal.loads(blob)
        except (EOFError, ValueError, TypeError):  # the payload's checksum held: only a bug gets here
            return MISSING
        return data

    def put(self, digest: str, limits: YamlLimits, kept: Any) -> None:
        """Keep ``kept`` (``gateway.definitions.yamlsource.keep_document``: the packed text and the data) for the file of
        ``digest``; written by the next ``save``."""
        try:
            blob = marshal.dumps(kept)
        except ValueError:  # a value marshal has no form for (none comes from a safe YAML load)
            return
        entries = self._read(limits)
        if entries is None:
            return
        with self._lock:
            entries[digest] = blob
            self._dirty = True

    def retain(self, digests: Iterable[str]) -> None:
        """Forget the entries of files no longer loaded (after a complete load: ``digests`` are its files')."""
        with self._lock:
            if self._entries is None:
                return
            self._kept = keep = set(digests)
            gone = [digest for digest in self._entries if digest not in keep]
            for digest in gone:
                del self._entries[digest]
            # Once released, what is on disk and not kept is dropped by the next save (one that has news).
            self._dirty = self._dirty or (bool(gone) and not self._released)

    def release(self) -> None:
        """Let go of the entries that are on disk (10,000 tools' are ~5 MB a serving gateway would hold for
        nothing): a later ``save`` reads them back. Until then a look-up finds only entries added since."""
        with self._lock:
            if self._dirty or self._entries is None:
                return
            self._entries, self._released = {}, True

    @property
    def dirty(self) -> bool:
        """Whether the snapshot on disk differs from what the latest load would keep."""
        return self._dirty

    def save(self) -> None:
        """Write the snapshot if it changed; a directory that cannot be written only means no cache."""
        with self._lock:
            path = self.path
            if not self._dirty or self._entries is None or path is None:
                return
            entries = self._entries
            if self._released:  # the entries on disk of files still loaded, and the new ones
                entries = {d: blob for d, blob in self._load().items() if d in self._kept} | entries
            payload = marshal.dumps(entries)
            self._dirty = False
            self._taken += 1
            number = self._taken
        with self._write_lock:
            if number < self._written:
                return
            self._written = number
            try:
                save(path, MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
            except OSError as exc:
                log.debug("build cache not written (%s): parsing again next time", exc)

    def _read(self, limits: YamlLimits) -> dict[str, bytes] | None:
        """The snapshot's entries (read on the first look-up), or None for limits other than the snapshot's."""
        with self._lock:
            if self._limits is None:
                self._limits = limits
                self._entries = self._load()
            elif limits != self._limits:  # one gateway has one set of limits; another caller is not served
                return None
            return self._entries

    def _load(self) -> dict[str, bytes]:
        path = self.path
        assert path is not None
        try:
            with path.open("rb") as file:
                if _writable_by_others(os.fstat(file.fileno())):
                    # Its checksum is no signature and marshal is not made for hostile bytes; what it holds would
                    # skip the checks. Not read, and replaced by a snapshot of this process's own (0600).
                    log.warning("build cache %s is writable by others or not this user's: not read, parsing every "
                                "definitions file again", path)
                    self._dirty = True
                    return {}
                raw = file.read()
        except OSError:
            return {}
        header, _, payload = raw[len(MAGIC):].partition(b"\n")
        try:
            if not raw.startswith(MAGIC) or hashlib.sha256(payload).hexdigest().encode() != header:
                raise ValueError("its checksum does not match")
            entries = marshal.loads(payload)
            if not isinstance(entries, dict):
                raise TypeError("not a mapping")
        except (EOFError, ValueError, TypeError) as exc:
            log.warning("build cache %s is corrupted (%s): parsing every definitions file again", path, exc)
            self._dirty = True  # rewritten after this load
            return {}
        return entries

    @staticmethod
    def _prune(directory: Path, keep: str) -> None:
        """Remove the entries of other keys (older releases): they are never read again."""
        with contextlib.suppress(OSError):
            for other in directory.iterdir():
                if other.name != keep and other.is_dir():
                    shutil.rmtree(other, ignore_errors=True)


def _writable_by_others(stat: os.stat_result) -> bool:
    """Whether another user (or group) could have written the file: not this process's user's, or group- or
    world-writable. (Root reads only root's files as well.)"""
    return stat.st_uid != os.geteuid() or bool(stat.st_mode & 0o022)
