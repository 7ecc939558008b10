"""The definitions files the admin console lists, shows, saves and creates.

Which files: the YAML files the loader reads (``gateway.definitions.load``). A path from a request is refused unless
it is relative and plain — no ``.``, ``..``, empty or hidden segment (the loader skips hidden names: a
ConfigMap's ``..data``), no backslash or NUL — ends in ``.yaml``/``.yml``, and its real path lies inside the
real definitions directory (``gateway.definitions.paths``: a link out of it is refused, as the loader refuses it). Files are
read only up to ``max_file_bytes``, the loader's own limit.

Writes are atomic: a hidden temporary file in the same directory (the loader and the watcher's filter skip it),
synced, given the old file's mode, then ``os.replace``: a reload reads the old bytes or the new, never half.
A save names the content it was based on (``base_sha256``); when the file changed on disk since, it is refused
(``Conflict``, 409) rather than overwrite someone else's edit. A new file is linked into place, so it never
replaces one that appeared meanwhile.

Read-only (``read_only_reason``): a definitions directory the process may not write, or a Kubernetes
ConfigMap mount (a ``..data`` link in it: kubelet replaces the whole directory on every update, so an edit
would vanish, and the volume is read-only anyway). The console then shows files but saves and creates nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
import threading
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...definitions.load import YAML_SUFFIXES, yaml_files
from ...definitions.paths import real_inside
from ...errors import BadRequest, Forbidden, GatewayError, PayloadTooLarge
from ...settings import Settings

MAX_PATH_CHARS = 1024
# NAME_MAX is 255 bytes on Linux's file systems; a save's temporary file adds '.' and '.<8 chars>.tmp' to the name.
MAX_NAME_BYTES = 255 - 14


class NotFound(GatewayError):
    status = 404


class Conflict(GatewayError):
    status = 409


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class DefinitionsFiles:
    root: Path
    max_bytes: int
    _write_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def of(cls, settings: Settings) -> DefinitionsFiles:
        return cls(settings.definitions, settings.max_file_bytes)

    def read_only_reason(self) -> str | None:
        """Why the console may not write here, or None when it may."""
        if not self.root.is_dir():
            return f"the definitions directory {self.root} does not exist"
        if os.path.islink(self.root / "..data"):
            return ("the definitions directory is a Kubernetes ConfigMap mount (it holds a '..data' link): change "
                    "the ConfigMap, not its files")
        if not os.access(self.root, os.W_OK):
            return f"the definitions directory {self.root} is not writable by the gateway's process"
        return None

    def check_writable(self) -> None:
        reason = self.read_only_reason()
        if reason is not None:
            raise Forbidden(f"The definitions directory is read-only: {reason}.")

    def listing(self) -> list[dict[str, Any]]:
        """Every definitions file the loader reads, by path below the directory, with its size and digest."""
        if not self.root.is_dir():
            return []
        found, _ = yaml_files(self.root)
        files = []
        for path, shown in found:
            with contextlib.suppress(OSError, NotFound, PayloadTooLarge):  # gone or grown since listed: leave it out
                data = self._read(path, shown)
                files.append({"path": shown, "bytes": len(data), "sha256": sha256(data)})
        return files

    def locate(self, relative: str) -> str:
        """The real path of definitions file ``relative`` (it may not exist yet); refuses what the loader would."""
        if not isinstance(relative, str) or not relative or len(relative) > MAX_PATH_CHARS:
            raise BadRequest("A definitions file path is a non-empty string below the definitions directory.")
        if "\\" in relative or "\0" in relative or relative.startswith("/"):
            raise BadRequest(f"Definitions file path {relative!r}: give it relative to the definitions directory, "
                             "with '/' between names.")
        parts = relative.split("/")
        if any(part in ("", ".", "..") or part.startswith(".") for part in parts):
            raise BadRequest(f"Definitions file path {relative!r}: no empty, '.', '..' or hidden (dot) names.")
        if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in parts):
            raise BadRequest(f"Definitions file path {relative[:80]!r}...: a name in it is longer than "
                             f"{MAX_NAME_BYTES} bytes, more than the file system takes.")
        if any(unicodedata.category(char).startswith("C") for char in relative):
            raise BadRequest(f"Definitions file path {relative!r}: no control or invisible format characters "
                             "(a right-to-left override shows another name than the one saved).")
        if not relative.endswith(YAML_SUFFIXES):
            raise BadRequest(f"Definitions file path {relative!r}: a definitions file ends in .yaml or .yml.")
        base = os.path.realpath(self.root)
        real = real_inside(self.root / relative, base)
        if real is None:
            raise Forbidden(f"Definitions file path {relative!r} leads outside the definitions directory.")
        return real

    def read(self, relative: str) -> tuple[str, str]:
        """The text of definitions file ``relative`` and the digest of its bytes."""
        data = self._read(self.locate(relative), relative)
        try:
            return data.decode("utf-8"), sha256(data)
        except UnicodeDecodeError as exc:
            raise BadRequest(f"Definitions file {relative!r} is not UTF-8 text: {exc}.") from None

    def _read(self, real: str, shown: str) -> bytes:
        try:
            with open(real, "rb") as file:
                info = os.fstat(file.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise NotFound(f"Definitions file {shown!r} is not a regular file.")
                if info.st_size > self.max_bytes:
                    raise PayloadTooLarge(f"Definitions file {shown!r} is {info.st_size} bytes, over "
                                          f"max_file_bytes ({self.max_bytes}).")
                return file.read(self.max_bytes + 1)[:self.max_bytes]
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFound(f"No definitions file {shown!r}.") from None

    def save(self, relative: str, text: str, base_sha256: str) -> str:
        """Replace definitions file ``relative`` with ``text`` if it still holds what ``base_sha256`` names;
        the digest of what it holds now."""
        self.check_writable()
        real = self.locate(relative)
        data = text.encode()
        with self._write_lock:  # the console's own saves one at a time: the digest compared is the one replaced
            current = sha256(self._read(real, relative))
            if current != base_sha256:
                raise Conflict(f"Definitions file {relative!r} changed on disk since it was opened (it now has "
                               f"sha256 {current}): open it again and redo the edit.")
            _write_atomically(real, data, os.stat(real).st_mode)
        return sha256(data)

    def exists(self, relative: str) -> None:
        """``NotFound`` unless definitions file ``relative`` exists (and is one the console may open)."""
        if not os.path.isfile(self.locate(relative)):
            raise NotFound(f"No definitions file {relative!r}.")

    def create(self, relative: str, text: str, modules: Mapping[str, str] | None = None) -> str:
        """Create definitions file ``relative`` holding ``text``, and the ``python/`` modules it names (path below
        the directory -> text); ``Conflict`` if any of them exists. The digest of the definitions file."""
        self.check_writable()
        real = self.locate(relative)
        if os.path.lexists(real):
            raise Conflict(f"{relative!r} already exists: open it instead.")
        base = os.path.realpath(self.root)
        created: list[str] = []
        try:
            for path, source in (modules or {}).items():
                module = real_inside(self.root / path, base)
                if module is None:
                    raise Forbidden(f"{path!r} leads outside the definitions directory.")
                os.makedirs(os.path.dirname(module), exist_ok=True)
                create_file(module, path, source)
                created.append(module)
            return create_file(real, relative, text)
        except BaseException:
            for module in created:  # all or nothing: a module without its definitions file is litter
                with contextlib.suppress(OSError):
                    os.unlink(module)
            raise


def create_file(real: str, shown: str, text: str) -> str:
    """Write a new file at ``real``, all at once, never over an existing one; the digest of its bytes."""
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        raise BadRequest(f"Cannot create {shown!r}: its directory does not exist.")
    data = text.encode()
    temporary = _temporary(real, data, 0o644)
    try:
        os.link(temporary, real)  # fails if the name is taken, even by a file that appeared a moment ago
    except FileExistsError:
        raise Conflict(f"{shown!r} already exists: open it instead.") from None
    finally:
        os.unlink(temporary)
    return sha256(data)


def _write_atomically(real: str, data: bytes, mode: int) -> None:
    temporary = _temporary(real, data, mode)
    try:
        os.replace(temporary, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _temporary(real: str, data: bytes, mode: int) -> str:
    """A hidden file beside ``real`` holding ``data``, synced to disk."""
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(real), prefix=f".{os.path.basename(real)}.",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), mode & 0o7777)
            os.fsync(file.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary
