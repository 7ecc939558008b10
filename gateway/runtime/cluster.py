"""The replica registry: every replica says, every ``heartbeat_s``, which catalog it serves and whether its last
reload worked; ``/status`` lists the live ones and says whether they all serve the same version.

A replica's record lives ``3 × heartbeat_s`` in the shared state (``gateway.state``), so a replica that died is
gone from the list within that time with nothing to clean up. Without cluster settings the state is this
process's memory and the list holds this replica only — the same code, nothing shared.

The heartbeat also watches the store: when a write fails the replica is ``degraded`` (``/status`` says so and
why; ``/healthz`` stays ok, because calls that need no shared state still work), and the next heartbeat that
succeeds clears it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..state import StateUnavailable
from ..state.misshapen import Misshapen

if TYPE_CHECKING:
    from ..catalog.snapshot import Catalog
    from ..settings import Settings
    from ..state import SharedState
    from .rebuild import Listener, ReloadOutcome

log = logging.getLogger("gateway.cluster")
REPLICAS = "replica:"
DEFAULT_HEARTBEAT_S = 2.0
WORKER_ENV = "TOOL_GATEWAY_WORKER"  # "index/count": this replica is a worker of `serve --workers N`


class Served(Protocol):
    """What the cluster services read of the gateway they run for: ``gateway.runtime.gateway.Gateway``, which holds
    them in turn and names their types (an import of it here would close a circle)."""

    settings: Settings
    state: SharedState
    replicas: Replicas | None

    @property
    def catalog(self) -> Catalog: ...

    @property
    def last_reload(self) -> ReloadOutcome: ...

    def on_change(self, listener: Listener) -> None: ...


@dataclass
class Health:
    degraded: bool = False
    reason: str = ""
    since: float = 0.0


class Replicas:
    """This replica's registration and the view of all of them, for one gateway."""

    def __init__(self, gateway: Served):
        self.gateway = gateway
        self.id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.heartbeat_s = float(gateway.settings.cluster.get("heartbeat_s", DEFAULT_HEARTBEAT_S))
        self.started = time.time()
        self.health = Health()
        self.misshapen = Misshapen(log)
        self.worker = os.environ.get(WORKER_ENV)  # "index/count", set by the supervisor of `serve --workers N`

    def record(self) -> dict[str, Any]:
        last = self.gateway.last_reload
        record = {"id": self.id, "pid": os.getpid(), "host": socket.gethostname(), "started": self.started,
                  "at": time.time(), "version": self.gateway.catalog.version, "tools": len(self.gateway.catalog.tools),
                  "last_reload_ok": last.ok}
        if self.worker is not None:  # one of `serve --workers N`: which, and its supervisor's process
            record |= {"worker": self.worker, "supervisor_pid": os.getppid()}
        return record

    async def beat(self) -> None:
        try:
            await self.gateway.state.put(REPLICAS + self.id, json.dumps(self.record()).encode(), 3 * self.heartbeat_s)
        except StateUnavailable as exc:
            if not self.health.degraded:
                log.warning("degraded: %s; calls that need no shared state keep working", exc)
                self.health = Health(True, str(exc), time.time())
            return
        if self.health.degraded:
            log.info("shared state reachable again after %.1f s", time.time() - self.health.since)
            self.health = Health()

    async def view(self) -> dict[str, Any]:
        """The live replicas and whether they agree on the catalog version (``/status``'s ``cluster``)."""
        body: dict[str, Any] = {"mode": self.gateway.state.kind, "replica": self.id,
                                "degraded": self.health.degraded}
        if self.health.degraded:
            body["reason"] = self.health.reason
        try:
            found = await self.gateway.state.scan(REPLICAS)
        except StateUnavailable as exc:
            return body | {"degraded": True, "reason": str(exc), "replicas": [], "same_version": None}
        replicas = sorted(filter(None, (self._well_shaped(k, v) for k, v in found.items())), key=lambda r: r["id"])
        if not any(r["id"] == self.id for r in replicas):  # not yet registered (or the store lost it)
            replicas.append(self.record())
        versions = {r["version"] for r in replicas}
        return body | {"replicas": replicas, "same_version": len(versions) == 1,
                       "versions": sorted(versions)}

    def _well_shaped(self, key: str, raw: bytes) -> dict[str, Any] | None:
        """A replica record as ``beat`` writes it, or None for another writer's or a corrupt value: left out of the
        list (never a 500)."""
        try:
            record = json.loads(raw)
        except ValueError:  # not JSON, or not UTF-8
            record = None
        if (type(record) is dict and isinstance(record.get("id"), str) and isinstance(record.get("version"), str)
                and isinstance(record.get("tools"), int)):
            return record
        self.misshapen.tell(key, f"replica record {key[:80]} has the wrong shape; left out of the list")
        return None

    async def run(self) -> None:
        while True:
            await self.beat()
            await asyncio.sleep(self.heartbeat_s)


def public_view(view: dict[str, Any]) -> dict[str, Any]:
    """What ``/status`` tells a caller who is not an admin of ``Replicas.view()``: the mode and whether all is well,
    not which hosts run, nor where the store is."""
    return {key: view.get(key) for key in ("mode", "degraded", "same_version")}


@contextlib.asynccontextmanager
async def replicating(gateway: Served) -> AsyncIterator[Replicas]:
    """The registry service for the app's lifespan: registers now, beats until the app stops, then leaves."""
    replicas = Replicas(gateway)
    gateway.replicas = replicas
    task = asyncio.create_task(replicas.run(), name="gateway-heartbeat")
    gateway.on_change(lambda _catalog: replicas.beat())  # a new version is told at once, not a heartbeat later
    try:
        yield replicas
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(StateUnavailable):
            await gateway.state.delete(REPLICAS + replicas.id)
