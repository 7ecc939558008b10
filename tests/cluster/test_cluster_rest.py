"""REST through nginx in front of 3 replicas: spread over all of them, one catalog version, a replica named on
every response."""

from __future__ import annotations

import httpx
from conftest import Cluster, rest_call


def test_calls_through_nginx_are_spread_over_every_replica(cluster: Cluster) -> None:
    """Twelve calls through the round-robin balancer are answered by all three replicas, each naming itself in
    X-Gateway-Replica, all with the same X-Catalog-Version and the right result."""
    with httpx.Client(base_url=cluster.url, headers=cluster.headers(), timeout=10) as client:
        responses = [rest_call(client, "sum", {"a": n, "b": 1}) for n in range(12)]
    assert [r.json()["result"] for r in responses] == [n + 1 for n in range(12)]
    assert {cluster.replica(r) for r in responses} == set(cluster.ids.values())
    assert len({r.headers["x-catalog-version"] for r in responses}) == 1
