"""Where sources keep what they last fetched, so that an upstream down at start-up still serves its tools (stale).

One directory per gateway user, outside the definitions directory (which may be read-only, a ConfigMap):
``$TOOL_GATEWAY_STATE_DIR``, else ``$XDG_CACHE_HOME/tool-gateway``, else ``~/.cache/tool-gateway``. Each source
kind keeps its files under ``<state dir>/<kind>/``, named by a digest of what identifies the upstream (its URL),
so two gateways sharing the directory for the same upstream share the copy and never clash otherwise.

Writes are atomic (a temporary file renamed over the old one): a reader never sees half a document.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

ENV_VAR = "TOOL_GATEWAY_STATE_DIR"


def state_dir() -> Path:
    """The directory sources keep their last known upstream documents in (not created here)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit)
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache_home, "tool-gateway")


def entry(kind: str, identity: str, suffix: str = "") -> Path:
    """The file a source of ``kind`` keeps the copy of the upstream ``identity`` (a URL, a command line) in."""
    name = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return state_dir() / kind / f"{name}{suffix}"


def save(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a failure (read-only, full disk) is the caller's to report or ignore."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def load(path: Path, max_bytes: int) -> bytes | None:
    """The copy at ``path``, or None when there is none (or it is larger than ``max_bytes``, so not ours)."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        return path.read_bytes()
    except OSError:
        return None

