"""``X-Catalog-Version`` and ``X-Gateway-Replica`` on every response: which catalog answered, and which replica,
so a client (an operator, a test behind a load balancer) can tell replicas apart without asking ``/status``.

The replica is ``gateway.runtime.cluster.Replicas.id`` (the id ``/status`` lists); it is absent while the app runs
without its lifespan (no registry then). ``front.Front`` adds them."""

from __future__ import annotations

from typing import Any

HEADER = b"x-catalog-version"
REPLICA_HEADER = b"x-gateway-replica"


def version_headers(version: str, replicas: Any) -> list[tuple[bytes, bytes]]:
    """The raw headers naming catalog ``version`` and the replica of ``replicas`` (a ``Replicas``, or None)."""
    added = [(HEADER, version.encode())]
    if replicas is not None:
        added.append((REPLICA_HEADER, replicas.id.encode()))
    return added
