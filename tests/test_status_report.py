"""``tool-gateway status [--cluster]``: what it prints of a gateway's /status and when it exits 1."""

from __future__ import annotations

import time

from support import EXAMPLES, serving

from gateway.cli.main import main
from gateway.cli.status import report
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings


def view(*versions: str, degraded: bool = False) -> dict:
    replicas = [{"id": f"r{n}", "version": v, "tools": 3, "last_reload_ok": True, "at": time.time()}
                for n, v in enumerate(versions)]
    body = {"mode": "redis", "replica": "r0", "degraded": degraded, "replicas": replicas,
            "same_version": len(set(versions)) == 1, "versions": sorted(set(versions))}
    if degraded:
        body["reason"] = "shared state (Redis at redis://127.0.0.1:6379) is unreachable"
    return {"status": "ok", "version": versions[0], "tools": 3, "last_reload_ok": True, "cluster": body}


def test_replicas_on_one_version_are_healthy():
    """Three replicas on one version: each listed with its version, 'all serve catalog v1', healthy."""
    lines, healthy = report(view("v1", "v1", "v1"), "http://lb", cluster=True)

    assert healthy is True
    assert "replicas: 3, all serve catalog v1" in lines
    assert sum(" version v1 " in line for line in lines) == 3


def test_replicas_on_different_versions_are_not_healthy():
    """Two versions among the replicas: the line says VERSIONS DIFFER and names both; not healthy."""
    lines, healthy = report(view("v1", "v2", "v1"), "http://lb", cluster=True)

    assert healthy is False
    assert "replicas: 3, VERSIONS DIFFER: v1, v2" in lines


def test_a_degraded_gateway_is_not_healthy_even_without_cluster():
    """Shared state unreachable: 'DEGRADED' with the reason, and not healthy, with or without --cluster."""
    for cluster in (False, True):
        lines, healthy = report(view("v1", degraded=True), "http://lb", cluster=cluster)
        assert healthy is False
        assert any("DEGRADED: shared state (Redis at" in line for line in lines)


def test_status_of_a_running_gateway(capsys, monkeypatch):
    """`status --url` asks a running gateway (memory mode) and prints its catalog version; exit 0."""
    gateway = Gateway(Settings(definitions=EXAMPLES, reload=False))
    monkeypatch.delenv("TOOL_GATEWAY_ADMIN_KEY", raising=False)
    with serving(create_app(gateway), lifespan="on") as server:
        code = main(["status", "--url", server.url])

    out = capsys.readouterr().out
    assert code == 0
    assert f"catalog {gateway.catalog.version}" in out


def test_status_of_a_gateway_that_is_not_running(capsys):
    """Nothing listening at --url: exit 1 with a message naming the URL."""
    assert main(["status", "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the gateway at http://127.0.0.1:9" in capsys.readouterr().err


def test_without_an_admin_key_the_replicas_are_not_listed_but_agreement_is():
    """/status shows non-admins only mode/degraded/same_version: status says the list needs an admin key."""
    body = view("v1", "v2")
    body["cluster"] = {k: body["cluster"][k] for k in ("mode", "degraded", "same_version")}

    lines, healthy = report(body, "http://lb", cluster=True)

    assert healthy is False
    assert any("listed to an admin key only" in line and "VERSIONS DIFFER" in line for line in lines)
