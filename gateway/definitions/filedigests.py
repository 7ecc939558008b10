"""Content digests of files, read again only when their stat signature changes.

``FileDigests`` gives the SHA-256 of a file, read again only when its stat signature (mtime, ctime, size, inode)
changed, and never when it is too large or not a regular file (``read_bounded``). A file changed within the last
``SETTLE_NS`` is always read again: file-system clocks tick coarsely (a few milliseconds), so two same-sized
writes in one tick would otherwise look like one (git's "racily clean" entries).

Loading definitions (``gateway.definitions.load``) and rebuilding tools (``gateway.catalog.cache``) both use it; it knows
neither.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

SETTLE_NS = 2_000_000_000


class FileRefused(OSError):
    """A file that is not read: larger than allowed, or not a regular file (a pipe would block the reader)."""


def read_bounded(path: str, max_bytes: int | None) -> bytes:
    """The bytes of the regular file at ``path``, judged by its size before any byte is read."""
    # O_NONBLOCK: opening a named pipe must not wait for a writer; fstat then judges what was opened.
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as file:
        stat = os.fstat(descriptor)
        if not S_ISREG(stat.st_mode):
            raise FileRefused("not a regular file: not read")
        if max_bytes is not None and stat.st_size > max_bytes:
            raise FileRefused(_too_large(stat.st_size, max_bytes))
        if max_bytes is None:
            data = file.read()
        else:
            # Asked for what fstat said (+1 to see growth), not max_bytes + 1: a read of n bytes allocates n
            # first, and 1 MiB allocated and freed per file was most of reading 1,000 small files.
            wanted = stat.st_size + 1
            data = file.read(wanted)
            if len(data) == wanted:  # it grew since fstat: read on, to the bound
                data += file.read(max_bytes + 1 - wanted)
    if max_bytes is not None and len(data) > max_bytes:  # grew since fstat
        raise FileRefused(_too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"file of {size:,} bytes is larger than max_file_bytes ({max_bytes:,}): not read"


@dataclass(frozen=True, slots=True)
class _Seen:
    signature: tuple[int, int, int, int]
    digest: str
    settled: bool  # changed long enough ago that an unchanged signature proves unchanged bytes


class FileDigests:
    """Content digests of files, re-reading only the files whose stat signature changed."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}
        self._touched: set[str] = set()

    def digest(self, path: str | os.PathLike[str]) -> str:
        """The file's SHA-256 (hex); raises ``OSError`` when it cannot be read."""
        return self.read(path)[0]

    def read(self, path: str | os.PathLike[str], max_bytes: int | None = None, *,
             force: bool = False) -> tuple[str, bytes | None]:
        """The file's digest, and its bytes when they had to be read (None when the digest was known, unless
        ``force``). Raises ``OSError``; ``FileRefused`` for a file over ``max_bytes`` or not a regular file."""
        key = os.fspath(path)
        # Stat before reading: a change after the stat shows in the next stat, so it is never missed.
        stat = os.stat(key)
        signature = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
        seen = self._seen.get(key)
        if not force and seen is not None and seen.settled and seen.signature == signature:
            self._touched.add(key)
            return seen.digest, None
        data = read_bounded(key, max_bytes)
        digest = hashlib.sha256(data).hexdigest()
        settled = time.time_ns() - max(stat.st_mtime_ns, stat.st_ctime_ns) > SETTLE_NS
        self._seen[key] = _Seen(signature, digest, settled)
        self._touched.add(key)  # only once stored: every touched file is then one that is kept
        return digest, data

    def sweep(self) -> None:
        """Forget every file not asked about since the last sweep (call once per build)."""
        # Touched files are all kept, so equal counts mean nothing went: no walk over 100,000 entries per reload.
        if len(self._seen) > len(self._touched):
            self._seen = {key: seen for key, seen in self._seen.items() if key in self._touched}
        self._touched = set()

    def tree(self, directory: Path, pattern: str) -> str:
        """One digest of every file matching ``pattern`` below ``directory``, by relative path and content."""
        sha = hashlib.sha256()
        for path in sorted(directory.rglob(pattern)) if directory.is_dir() else ():
            try:
                digest = self.digest(path)
            except OSError:  # deleted while listing: the watcher reports it and the next build settles it
                continue
            sha.update(f"{path.relative_to(directory).as_posix()}\0{digest}\0".encode())
        return sha.hexdigest()
