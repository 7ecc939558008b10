"""Where an upstream's OAuth state is kept, by (source id, principal): the client the gateway registered (or was
given) and the tokens it holds. The principal is ``config.GATEWAY`` for the gateway's own connection; each
user's own tokens are kept under the user's name.

``EncryptedFileStore`` (one process): one file per key under ``<state dir>/oauth/``, each a Fernet token
(AES-128-CBC with HMAC-SHA256, ``cryptography``) of the record's JSON, under a key derived (HKDF-SHA256) from the
secret the ``upstream_oauth_key_secret`` setting names; nothing in it is readable without that secret, and a file
changed by anyone else (or written under another key) is refused as a whole (``Unreadable``), never half read.
``MemoryStore``: in the process only (no key configured; tests). Each person's own connections
(``gateway.upstream.connections``) use the file store in one process and the shared state (Redis) in cluster mode.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAX_RECORD_BYTES = 256 * 1024  # a record is a client and a token: a larger file is none of ours
Record = dict[str, Any]


class Unreadable(Exception):
    """A stored record that cannot be read back (tampered with, or written under another key)."""


class TokenStore(Protocol):
    def load(self, source: str, principal: str) -> Record | None: ...

    def save(self, source: str, principal: str, record: Record) -> None: ...

    def delete(self, source: str, principal: str) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self._records: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def load(self, source: str, principal: str) -> Record | None:
        with self._lock:
            kept = self._records.get((source, principal))
        return json.loads(kept) if kept is not None else None

    def save(self, source: str, principal: str, record: Record) -> None:
        with self._lock:
            self._records[(source, principal)] = json.dumps(record)

    def delete(self, source: str, principal: str) -> None:
        with self._lock:
            self._records.pop((source, principal), None)


def fernet(secret: str) -> Fernet:
    """The Fernet key derived from ``secret`` (any text: a generated key or a long passphrase)."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                   info=b"tool-gateway upstream oauth store").derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


class EncryptedFileStore:
    def __init__(self, directory: Path, secret: str):
        self.directory = directory
        self._fernet = fernet(secret)
        self._lock = threading.Lock()

    def path(self, source: str, principal: str) -> Path:
        name = hashlib.sha256(f"{source}\0{principal}".encode()).hexdigest()[:32]
        return self.directory / f"{name}.oauth"

    def load(self, source: str, principal: str) -> Record | None:
        try:
            with self.path(source, principal).open("rb") as file:
                sealed = file.read(MAX_RECORD_BYTES + 1)
        except FileNotFoundError:
            return None
        try:
            if len(sealed) > MAX_RECORD_BYTES:
                raise InvalidToken
            record = json.loads(self._fernet.decrypt(sealed))
        except (InvalidToken, ValueError):
            raise Unreadable(f"the OAuth tokens kept for source '{source}' cannot be read (changed on disk, or "
                             "written under another upstream_oauth_key_secret)") from None
        if not isinstance(record, dict):
            raise Unreadable(f"the OAuth tokens kept for source '{source}' are not a record")
        return record

    def records(self, limit: int = 100_000) -> list[Record]:
        """Every record that can be read (a listing's: one that cannot is left out, as ``load`` refuses it)."""
        found: list[Record] = []
        for path in sorted(self.directory.glob("*.oauth"))[:limit]:
            try:
                sealed = path.read_bytes()[:MAX_RECORD_BYTES + 1]
                record = json.loads(self._fernet.decrypt(sealed)) if len(sealed) <= MAX_RECORD_BYTES else None
            except (OSError, InvalidToken, ValueError):
                continue
            if isinstance(record, dict):
                found.append(record)
        return found

    def save(self, source: str, principal: str, record: Record) -> None:
        sealed = self._fernet.encrypt(json.dumps(record).encode())
        path = self.path(source, principal)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # created 0600
            try:
                with os.fdopen(handle, "wb") as file:
                    file.write(sealed)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def delete(self, source: str, principal: str) -> None:
        with self._lock, contextlib.suppress(FileNotFoundError):
            self.path(source, principal).unlink()
