"""`tool-gateway status --cluster` against 3 replicas behind nginx: every live replica listed on one version, and
exit 1 with the reason while Redis is stopped."""

from __future__ import annotations

from cluster_support import ADMIN_KEY, Cluster

from gateway.cli.main import main


def test_status_cluster_lists_every_replica_on_one_version(cluster: Cluster, capsys, monkeypatch):
    """Asked through nginx with the admin key, status --cluster lists the 3 replicas, says they all serve one
    catalog version and that the shared state is not degraded; exit 0."""
    monkeypatch.setenv("TOOL_GATEWAY_ADMIN_KEY", ADMIN_KEY)
    cluster.wait_until(lambda: cluster.same_version(), what="every replica on one catalog")

    code = main(["status", "--cluster", "--url", cluster.url])

    out = capsys.readouterr().out
    assert code == 0, out
    assert "replicas: 3, all serve catalog" in out and "not degraded" in out
    assert all(replica_id in out for replica_id in cluster.ids.values())


def test_status_cluster_exits_1_while_redis_is_stopped(cluster: Cluster, capsys, monkeypatch):
    """Redis stopped: status (with or without --cluster) says DEGRADED and names the shared state; exit 1."""
    monkeypatch.setenv("TOOL_GATEWAY_ADMIN_KEY", ADMIN_KEY)
    cluster.redis.stop()

    codes = [main(["status", "--url", cluster.url]), main(["status", "--cluster", "--url", cluster.url])]

    out = capsys.readouterr().out
    assert codes == [1, 1], out
    assert out.count("DEGRADED: shared state (Redis at") == 2
