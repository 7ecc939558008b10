"""The OAuth clients of one gateway's upstream connections (``McpPool.oauth``): one ``Authorizer`` per declared
upstream (by source id, URL and declaration: a changed declaration starts afresh), the store they keep tokens
in, and the authorization flows under way, each found by its ``state``, used once, and forgotten after
``FLOW_TTL_S``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from ... import secrets as secret_store
from .authorizer import Authorizer, Flow
from .config import OAuthClient
from .errors import FlowUnknown
from .store import EncryptedFileStore, MemoryStore, TokenStore

FLOW_TTL_S = 600.0
MAX_FLOWS = 1000  # authorizations under way at once: a flood of connect requests cannot fill the memory


class OAuthClients:
    def __init__(self) -> None:
        self.store: TokenStore = MemoryStore()
        self._store_key: tuple[Path, str] | None = None
        self._authorizers: dict[tuple[str, str, OAuthClient], Authorizer] = {}
        self._by_source: dict[str, Authorizer] = {}
        self._flows: dict[str, Flow] = {}
        self._lock = threading.Lock()

    def use_store(self, directory: Path, secret_name: str) -> None:
        """Keep tokens encrypted under ``directory`` with the key the secret ``secret_name`` holds (read now:
        ``SecretsMissing`` names it when it is not set); no name: in memory."""
        if not secret_name:
            return
        key = (directory, secret_store.resolve([secret_name])[secret_name])
        with self._lock:
            if key != self._store_key:
                self.store, self._store_key = EncryptedFileStore(*key), key

    def authorizer(self, source: str, url: str, declaration: OAuthClient,
                   secrets: Callable[[], dict[str, str]]) -> Authorizer:
        with self._lock:
            found = self._authorizers.get((source, url, declaration))
            if found is None:
                found = self._authorizers[(source, url, declaration)] = Authorizer(
                    source, url, declaration, lambda: self.store, secrets)
            self._by_source[source] = found
            return found

    def for_source(self, source: str) -> Authorizer | None:
        with self._lock:
            return self._by_source.get(source)

    def started(self, flow: Flow) -> None:
        now = time.time()
        flow.expires_at = now + FLOW_TTL_S
        with self._lock:
            for state in [s for s, f in self._flows.items() if f.expires_at <= now]:
                del self._flows[state]
            if len(self._flows) >= MAX_FLOWS:
                self._flows.pop(next(iter(self._flows)))
            self._flows[flow.state] = flow

    def take(self, state: str) -> Flow:
        with self._lock:
            flow = self._flows.pop(state, None)
        if flow is None or flow.expires_at <= time.time():
            raise FlowUnknown("no authorization is under way with this state (it was used, or has expired): "
                              "start again from /oauth/connect/<source>")
        return flow
