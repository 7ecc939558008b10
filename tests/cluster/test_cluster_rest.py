"""REST through nginx in front of 3 replicas: spread over all of them, one catalog version, a replica named on
every response (one process too)."""

from __future__ import annotations

import httpx
from cluster_support import Cluster, rest_call
from support import serving

from gateway.server import create_app
from gateway.settings import Settings


def test_calls_through_nginx_are_spread_over_every_replica(cluster: Cluster) -> None:
    """Twelve calls through the round-robin balancer are answered by all three replicas, each naming itself in
    X-Gateway-Replica, all with the same X-Catalog-Version and the right result."""
    with httpx.Client(base_url=cluster.url, headers=cluster.headers(), timeout=10) as client:
        responses = [rest_call(client, "sum", {"a": n, "b": 1}) for n in range(12)]
    assert [r.json()["result"] for r in responses] == [n + 1 for n in range(12)]
    assert {cluster.replica(r) for r in responses} == set(cluster.ids.values())
    assert len({r.headers["x-catalog-version"] for r in responses}) == 1


def test_one_process_names_its_replica_and_reports_memory_mode(examples_dir) -> None:
    """Without cluster settings every response still names the replica (the one process), and /status says
    the state is in memory, not degraded, one version."""
    app = create_app(Settings(definitions=examples_dir, reload=False))
    with serving(app, lifespan="on") as served:
        response = httpx.get(f"{served.url}/status", timeout=10)
    gateway = app.state.gateway
    assert response.headers["x-gateway-replica"] == gateway.replicas.id
    assert response.headers["x-catalog-version"] == gateway.catalog.version
    cluster = response.json()["cluster"]
    assert response.json()["status"] == "ok"
    assert cluster["mode"] == "memory" and cluster["degraded"] is False and cluster["same_version"] is True
    assert [r["id"] for r in cluster["replicas"]] == [gateway.replicas.id]
