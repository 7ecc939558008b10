"""What the server tests share (import as ``from server_support import ...``): keys, and running a server."""

from __future__ import annotations

from support import RunningServer, running  # noqa: F401 — the server tests import them from here

from gateway.settings import ApiKey, hash_key

READER_KEY = "reader-key-for-tests"  # may use the "math" toolset only
ADMIN_KEY = "admin-key-for-tests"
API_KEYS = (
    ApiKey("reader", hash_key(READER_KEY), toolsets=("math",)),
    ApiKey("admin", hash_key(ADMIN_KEY), admin=True),
)
